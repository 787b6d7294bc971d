package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// A worker stopped with SIGTERM (a rolling upgrade, a scale-down) hands a running job's
// watch and log forwarder to the next worker at once: their next attempts start after
// the retry policy's first interval, not after the heartbeat timeout, which this test
// sets to 10 minutes so that only a handoff can finish the job within the test's time.
// The history shows each one's retry was caused by the stop (failure type
// WorkerStopping, no timeout), and every line arrives exactly once.
func TestWorkerStoppedWithSIGTERMHandsItsJobOver(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 3*time.Minute)
	longHeartbeat := []string{"--long-heartbeat-timeout", "10m"}
	e, stateDir, first := workerStack(t, ctx, longHeartbeat...)
	c := itest.AdminClient(t, e)

	gate := filepath.Join(t.TempDir(), "gate")
	const ws, name = "handoff", "lines"
	itest.Submit(t, ctx, c, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  command: [sh, -c, 'i=0; while [ ! -e %s ]; do i=$((i+1)); echo "line $i"; sleep 0.05; done; echo "last $i"']
  roles: {worker: {replicas: 2}}
`, gate)))
	testutil.Eventually(t, itest.Left(ctx), "the job running with lines forwarded", func() bool {
		j, err := c.GetJob(ctx, ws, name)
		if err != nil || j.Status.Phase != schemas.JobRunning {
			return false
		}
		n := 0
		_ = c.Logs(ctx, ws, name, dlc.LogOptions{}, func(events.LogRecord) error { n++; return nil })
		return n >= 10
	}, itest.PollInterval)

	// SIGTERM: the worker stops on its own, within its stop timeout.
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the worker ended with %v after SIGTERM, want exit status 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the worker did not exit within a minute of SIGTERM")
	}
	startWorkerArgs(t, e, stateDir, nil, longHeartbeat...)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j := itest.WaitJob(t, ctx, c, ws, name, "terminal after the handoff", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Restarts != 0 {
		t.Fatalf("job %s with %d restarts (%s), want Succeeded in its first attempt", j.Status.Phase, j.Status.Restarts, j.Status.Message)
	}

	// The history: WatchGang's and ForwardLogs' attempts that completed were retries
	// caused by the stop.
	tc, err := client.Dial(client.Options{HostPort: e.Stack.Temporal.Address, Namespace: e.Stack.Temporal.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	handed := map[string]string{}
	scheduled := map[int64]string{}
	it := tc.GetWorkflowHistory(ctx, workflows.JobWorkflowID(ws, name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			f := a.GetLastFailure()
			kind := f.GetApplicationFailureInfo().GetType()
			if f.GetTimeoutFailureInfo() != nil {
				kind = "timeout " + f.GetTimeoutFailureInfo().GetTimeoutType().String()
			}
			handed[scheduled[a.GetScheduledEventId()]] = fmt.Sprintf("attempt %d after %s (%s)", a.GetAttempt(), kind, f.GetMessage())
		}
	}
	for _, act := range []string{workflows.ActivityWatchGang, workflows.ActivityForwardLogs} {
		got, ok := handed[act]
		t.Logf("%s: %s", act, got)
		if !ok || !strings.Contains(got, " after "+workers.ErrTypeWorkerStopping+" ") {
			t.Errorf("%s: %q, want a retry after a %s failure", act, got, workers.ErrTypeWorkerStopping)
		}
	}

	// Every line exactly once, in order per replica, up to the last.
	next := map[int]int{}
	last := map[int]bool{}
	err = c.Logs(ctx, ws, name, dlc.LogOptions{}, func(r events.LogRecord) error {
		var n int
		if _, err := fmt.Sscanf(r.Line, "last %d", &n); err == nil {
			if n != next[r.Index] {
				return fmt.Errorf("replica %d: %q after line %d", r.Index, r.Line, next[r.Index])
			}
			last[r.Index] = true
			return nil
		}
		if _, err := fmt.Sscanf(r.Line, "line %d", &n); err != nil || n != next[r.Index]+1 {
			return fmt.Errorf("replica %d: %q after line %d", r.Index, r.Line, next[r.Index])
		}
		next[r.Index] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !last[0] || !last[1] {
		t.Errorf("the last lines of replicas 0 and 1 forwarded: %v (lines %v)", last, next)
	}
}
