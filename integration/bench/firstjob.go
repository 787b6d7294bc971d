package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/opendlc/opendlc/integration/itest"
)

// firstJobTimes are one run's submit -> process started, by which job it was.
type firstJobTimes struct {
	// workerFirst is the worker's first job (workspace 0's first).
	workerFirst time.Duration
	// workspaceFirst are the first jobs of the other workspaces, on the warm worker.
	workspaceFirst []time.Duration
	// later are the second and third jobs of every workspace.
	later []time.Duration
}

// runFirstJobRepeated runs runFirstJob runs times, each on a fresh stack and worker,
// then prints min, median and max over the runs of the worker's first job, of the
// median first job of a workspace on the warm worker, and of the median later job.
func runFirstJobRepeated(dlcBin string, workspaces, runs int) error {
	var worker, wsFirst, later []time.Duration
	for r := range runs {
		fmt.Printf("\n# run %d of %d\n\n", r+1, runs)
		t, err := runFirstJob(dlcBin, workspaces)
		if err != nil {
			return fmt.Errorf("run %d of %d: %w", r+1, runs, err)
		}
		worker = append(worker, t.workerFirst)
		if len(t.workspaceFirst) > 0 {
			wsFirst = append(wsFirst, median(t.workspaceFirst))
		}
		later = append(later, median(t.later))
	}
	fmt.Printf("\n## %d runs: submit -> process started, min, median and max over the runs (load average %s)\n\n", runs, loadAvg())
	fmt.Printf("%-58s %10s %10s %10s\n", "job", "min", "median", "max")
	row := func(name string, xs []time.Duration) {
		if len(xs) > 0 {
			fmt.Printf("%-58s %10s %10s %10s\n", name, minDur(xs), median(xs), maxDur(xs))
		}
	}
	row("the worker's first job (workspace 0's first)", worker)
	row("a workspace's first job on the warm worker (run's median)", wsFirst)
	row("a later job of a workspace (run's median)", later)
	return nil
}

// runFirstJob separates the two things the first job of `task bench` is at once: the
// first job the worker runs (cold: its first workflow and activity tasks, connections,
// caches) and the first job of its workspace. On one worker process it runs, in
// workspaces first-0..first-(w-1), three jobs each, one after another, and prints each
// job's submit -> process started: the first job of workspace 0 is the worker's first;
// the first jobs of the others are first jobs of a workspace on a warm worker.
func runFirstJob(dlcBin string, workspaces int) (firstJobTimes, error) {
	var times firstJobTimes
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "opendlc-bench-first-")
	if err != nil {
		return times, err
	}
	defer os.RemoveAll(dir)
	e, _, stop, err := stackWithWorker(ctx, dir, dlcBin)
	if err != nil {
		return times, err
	}
	defer stop()
	c, err := itest.Client(e)
	if err != nil {
		return times, err
	}
	fmt.Printf("submit -> process started, local backend, one worker, jobs one after another (load average %s)\n\n", loadAvg())
	fmt.Printf("%-6s %-10s %-26s %12s\n", "job", "workspace", "which", "to start")
	job := 0
	for w := range workspaces {
		ws := fmt.Sprintf("first-%d", w)
		for k := range 3 {
			j, err := oneJobIn(ctx, c, nil, ws, job)
			if err != nil {
				return times, fmt.Errorf("job %d in %s: %w", job, ws, err)
			}
			toStart := j.toStart()
			which := "later job of the workspace"
			switch {
			case job == 0:
				which = "worker's first job"
				times.workerFirst = toStart
			case k == 0:
				which = "workspace's first job"
				times.workspaceFirst = append(times.workspaceFirst, toStart)
			default:
				times.later = append(times.later, toStart)
			}
			fmt.Printf("%-6d %-10s %-26s %12s\n", job, ws, which, toStart.Round(time.Millisecond))
			job++
		}
	}
	return times, nil
}
