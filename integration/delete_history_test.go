package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// TestDeleteKeepsHistory: a default delete takes a finished job out of the list and
// Get, but its record, logs and events stay readable by uid, and its name can be used
// again; a purge removes the record, the events and the log records; deleting a
// running job stops it, publishes its terminal event and leaves no process behind.
func TestDeleteKeepsHistory(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api

	// Default delete: hidden, but readable by uid.
	submit(t, ctx, itest.ShellJob(ws, "kept", `echo kept line one; echo kept line two`))
	kept := waitTerminal(t, ctx, ws, "kept")
	if err := c.DeleteJob(ctx, ws, "kept"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.GetJob(ctx, ws, "kept"); !dlc.IsNotFound(err) {
		t.Errorf("get a deleted job by name: %v, want 404", err)
	}
	if l, err := c.ListJobs(ctx, ws, dlc.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("list after delete: %+v (%v), want none", l, err)
	}
	run, err := c.GetJobRun(ctx, ws, "kept", kept.UID)
	if err != nil || run.Status.Phase != schemas.JobSucceeded || run.UID != kept.UID {
		t.Fatalf("get the deleted run by uid: %+v (%v)", run, err)
	}
	if d, err := c.GetDeletedJob(ctx, ws, "kept"); err != nil || d.UID != kept.UID {
		t.Errorf("get with includeDeleted: %+v (%v)", d, err)
	}
	lines := runLines(t, ws, "kept", kept.UID)
	if strings.Join(lines, "|") != "kept line one|kept line two" {
		t.Errorf("logs of the deleted run: %q", lines)
	}
	if ph := runPhases(t, ws, "kept", kept.UID); len(ph) == 0 || ph[len(ph)-1] != "Succeeded" {
		t.Errorf("status events of the deleted run: %v", ph)
	}
	if err := c.DeleteJob(ctx, ws, "kept"); !dlc.IsNotFound(err) {
		t.Errorf("a second delete: %v, want 404", err)
	}
	// The name is free again.
	submit(t, ctx, itest.ShellJob(ws, "kept", `echo second run`))
	again := waitTerminal(t, ctx, ws, "kept")
	if again.UID == kept.UID {
		t.Fatalf("the new job under the deleted name has the old uid")
	}
	if run, err := c.GetJobRun(ctx, ws, "kept", kept.UID); err != nil || run.UID != kept.UID {
		t.Errorf("the deleted run by uid after the name was reused: %+v (%v)", run, err)
	}

	// Purge: the record, the events and the log records go.
	if err := c.PurgeJob(ctx, ws, "kept"); err != nil {
		t.Fatalf("purge: %v", err)
	}
	if _, err := c.GetJobRun(ctx, ws, "kept", again.UID); !dlc.IsNotFound(err) {
		t.Errorf("get a purged run by uid: %v, want 404", err)
	}
	if _, err := c.GetDeletedJob(ctx, ws, "kept"); !dlc.IsNotFound(err) {
		t.Errorf("get a purged job with includeDeleted: %v, want 404", err)
	}
	if l := runLines(t, ws, "kept", again.UID); len(l) != 0 {
		t.Errorf("log records of the purged run left in the stream: %q", l)
	}
	if ph := runPhases(t, ws, "kept", again.UID); len(ph) != 0 {
		t.Errorf("status events of the purged run left in the stream: %v", ph)
	}

	// Deleting a running job: stopped, terminal event published, no process left.
	pidFile := filepath.Join(t.TempDir(), "pid")
	submit(t, ctx, itest.ShellJob(ws, "busy", fmt.Sprintf(`sleep 300 & echo $! > %s; wait`, pidFile)))
	busy := waitFor(t, ctx, ws, "busy", "running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	var pid int
	testutil.Eventually(t, time.Minute, "the job's sleep to write its pid", func() error {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return err
		}
		return nil
	})
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("the job's sleep (pid %d) is not running before the delete", pid)
	}
	if err := c.DeleteJob(ctx, ws, "busy"); err != nil {
		t.Fatalf("delete a running job: %v", err)
	}
	state := processState(pid)
	t.Logf("the job's sleep (pid %d) after the delete: state %q (empty: gone)", pid, state)
	if state != "" && state != "Z" {
		t.Errorf("the job's sleep (pid %d) still runs after the delete returned (state %s)", pid, state)
	}
	if ph := runPhases(t, ws, "busy", busy.UID); len(ph) == 0 || ph[len(ph)-1] != "Stopped" {
		t.Errorf("status events of the deleted running job: %v, want the last Stopped", ph)
	}
	if run, err := c.GetJobRun(ctx, ws, "busy", busy.UID); err != nil || run.Status.Phase != schemas.JobStopped {
		t.Errorf("the deleted running job by uid: %+v (%v), want Stopped", run, err)
	}
}

// runLines are the log lines of one run of a job in the log stream.
func runLines(t *testing.T, ws, name, uid string) []string {
	t.Helper()
	var out []string
	err := env.events.ReadUntil(testContext(t), jetstream.LogsStream, events.JobLogsFilter(ws, name), nil, func(_ string, data []byte) error {
		var rec events.LogRecord
		if json.Unmarshal(data, &rec) == nil && rec.UID == uid {
			out = append(out, rec.Line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runPhases are the phases of one run of a job's status events in the stream.
func runPhases(t *testing.T, ws, name, uid string) []string {
	t.Helper()
	var out []string
	for _, d := range statusEvents(t, testContext(t), ws, name) {
		if d.UID == uid {
			out = append(out, d.Phase)
		}
	}
	return out
}

// processState is a process's state letter in /proc (R, S, Z...), "" when it is gone.
// A zombie (Z) has ended and waits only to be reaped by its parent.
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return "?"
}
