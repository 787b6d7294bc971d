package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/opendlc/opendlc/integration/itest"
)

// runFirstJob separates the two things the first job of `task bench` is at once: the
// first job the worker runs (cold: its first workflow and activity tasks, connections,
// caches) and the first job of its workspace. On one worker process it runs, in
// workspaces first-0..first-(w-1), three jobs each, one after another, and prints each
// job's submit -> process started: the first job of workspace 0 is the worker's first;
// the first jobs of the others are first jobs of a workspace on a warm worker.
func runFirstJob(dlcBin string, workspaces int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "opendlc-bench-first-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e, _, stop, err := stackWithWorker(ctx, dir, dlcBin)
	if err != nil {
		return err
	}
	defer stop()
	c, err := itest.Client(e)
	if err != nil {
		return err
	}
	fmt.Printf("submit -> process started, local backend, one worker, jobs one after another (load average %s)\n\n", loadAvg())
	fmt.Printf("%-6s %-10s %-26s %12s\n", "job", "workspace", "which", "to start")
	job := 0
	for w := range workspaces {
		ws := fmt.Sprintf("first-%d", w)
		for k := range 3 {
			toStart, _, _, err := oneJobIn(ctx, c, ws, job)
			if err != nil {
				return fmt.Errorf("job %d in %s: %w", job, ws, err)
			}
			which := "later job of the workspace"
			switch {
			case job == 0:
				which = "worker's first job"
			case k == 0:
				which = "workspace's first job"
			}
			fmt.Printf("%-6d %-10s %-26s %12s\n", job, ws, which, toStart.Round(time.Millisecond))
			job++
		}
	}
	return nil
}
