package integration

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// NATS goes down while a job runs: the job carries on and its status stays readable
// (Temporal is the source of truth); when NATS is back, the queued status events and
// the log lines are published, each exactly once and in order.
func TestNATSOutageLosesNoEvents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	e := itest.StartStack(t, ctx, embedded.Config{Dir: filepath.Join(dir, "stack"), WorkDir: env.dir})
	c := itest.AdminClient(t, e)
	if _, err := c.SubmitJob(ctx, []byte(itest.JobDoc("outage", "outage", `
  framework: custom
  command: [sh, -c, 'echo before; sleep 1; echo after']
  roles: {worker: {replicas: 1}}
`))); err != nil {
		t.Fatal(err)
	}
	poll := func(what string, cond func(*api.Job) bool) *api.Job {
		t.Helper()
		var j *api.Job
		testutil.Eventually(t, itest.Left(ctx), what, func() error {
			var err error
			if j, err = c.GetJob(ctx, "outage", "outage"); err != nil {
				return err
			}
			if !cond(j) {
				return fmt.Errorf("status %+v", j.Status)
			}
			return nil
		}, 50*time.Millisecond)
		return j
	}
	poll("Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })

	u, err := url.Parse(e.Stack.NATS.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	if err := e.Stack.NATS.Close(); err != nil {
		t.Fatal(err)
	}
	// While NATS is down the replica finishes, and status is still served from Temporal.
	poll("its replica finished while NATS is down", func(j *api.Job) bool {
		return len(j.Status.Replicas) == 1 && j.Status.Replicas[0].Phase == schemas.ReplicaSucceeded
	})
	restarted, err := devstack.StartNATS(ctx, devstack.NATSOptions{Dir: filepath.Join(dir, "stack", "nats"), Port: port, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	e.Stack.NATS = restarted
	j := poll("terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s: %s", j.Status.Phase, j.Status.Message)
	}

	js, err := jetstream.Connect(restarted.URL, restarted.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	var phases []string
	testutil.Eventually(t, itest.Left(ctx), "4 status events after the outage", func() error {
		phases = nil
		if err := js.ReadUntil(ctx, jetstream.EventsStream, events.JobStatusSubject("outage", "outage"), nil, func(_ string, data []byte) error {
			phases = append(phases, phaseOf(t, data))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(phases) < 4 {
			return fmt.Errorf("events %v", phases)
		}
		return nil
	}, itest.PollInterval)
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, phases); diff != "" {
		t.Errorf("status events (-want +got):\n%s", diff)
	}
	var lines []string
	if err := c.Logs(ctx, "outage", "outage", dlc.LogOptions{}, func(r events.LogRecord) error {
		lines = append(lines, r.Line)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"before", "after"}, lines); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}
