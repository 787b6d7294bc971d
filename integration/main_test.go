// Package integration tests OpenDLC end to end on the real components: the Temporal dev
// server, NATS JetStream and the versitygw S3 gateway, all started by TestMain on
// loopback, with a worker running the local backend. Each test uses its own workspace.
package integration

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/api/server"
	"github.com/opendlc/opendlc/checkpoint"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// env is the stack shared by every test of the package.
var env struct {
	e        *embedded.Embedded
	api      *dlc.Client
	temporal client.Client
	events   *jetstream.Client
	store    *checkpoint.Store
	trainer  string // path of the built example trainer
	dir      string
	faults   *faults
}

func TestMain(m *testing.M) {
	os.Exit(itest.Main(m, "integration", 20*time.Minute, setup))
}

func setup(ctx context.Context, dir string) (func(), error) {
	env.dir = dir
	env.trainer = filepath.Join(dir, "trainer")
	// Build the trainer while the stack starts: the build computes, the start mostly
	// waits.
	built := make(chan error, 1)
	go func() { built <- itest.Build(ctx, "./examples/trainer", env.trainer) }()
	// dlc too, for the tests that run it (buildDLC's callers wait for this build rather
	// than spend their own deadline on it).
	go func() { _, _ = buildDLC() }()
	env.faults = newFaults()
	e, err := embedded.Start(ctx, embedded.Config{
		Dir: filepath.Join(dir, "stack"), APIAddr: "127.0.0.1:0", WorkDir: dir, Logger: itest.Logger(slog.LevelWarn),
		S3EventsWorkspace: s3Workspace, Interceptors: []interceptor.WorkerInterceptor{env.faults, historyBounds},
		// Test webhooks listen on loopback, which webhooks reach only when allowed.
		WebhookAllow: []string{"127.0.0.1"},
		// Notification messages link to the console (notify_formats_test.go).
		ConsoleURL: "https://console.test.invalid",
		// Resource samples every 2 s, for TestResourceSamplesOfLocalReplicas.
		ResourceInterval: 2 * time.Second,
		// Summaries of suppressed audit records every 2 s, for TestBadTokenFloodIsLimited.
		RateLimits: server.RateLimits{SummaryEvery: 2 * time.Second},
	})
	if err != nil {
		return nil, err
	}
	env.e = e
	teardown := func() {
		if env.events != nil {
			env.events.Close()
		}
		if env.temporal != nil {
			env.temporal.Close()
		}
		e.Close()
	}
	if env.api, err = itest.Client(e); err != nil {
		return teardown, err
	}
	if env.temporal, err = client.DialContext(ctx, client.Options{
		HostPort: e.Stack.Temporal.Address, Namespace: e.Stack.Temporal.Namespace,
	}); err != nil {
		return teardown, err
	}
	if env.events, err = jetstream.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...); err != nil {
		return teardown, err
	}
	if env.store, err = checkpoint.NewStore(e.S3Config()); err != nil {
		return teardown, err
	}
	return teardown, <-built
}

// workspace derives a workspace name (a DNS label) from the test name.
func workspace(t *testing.T) string {
	s := strings.ToLower(t.Name())
	s = regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(s, "-")
	s = strings.Trim(s, "-")
	if len(s) > 40 {
		s = strings.Trim(s[len(s)-40:], "-")
	}
	return s
}

func testContext(t *testing.T) context.Context { return itest.Context(t, 3*time.Minute) }

func submit(t *testing.T, ctx context.Context, spec string) *api.Job {
	t.Helper()
	return itest.Submit(t, ctx, env.api, spec)
}

// waitFor polls a job until cond holds, failing the test at ctx's deadline.
func waitFor(t *testing.T, ctx context.Context, ws, name string, what string, cond func(*api.Job) bool) *api.Job {
	t.Helper()
	return itest.WaitJob(t, ctx, env.api, ws, name, what, cond)
}

func waitTerminal(t *testing.T, ctx context.Context, ws, name string) *api.Job {
	t.Helper()
	return waitFor(t, ctx, ws, name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
}

// runJob submits the job name in workspace ws whose spec is spec (as itest.JobDoc
// takes it) and waits until it ends.
func runJob(t *testing.T, ctx context.Context, ws, name, spec string) *api.Job {
	t.Helper()
	submit(t, ctx, itest.JobDoc(name, ws, spec))
	return waitTerminal(t, ctx, ws, name)
}

// statusEvents reads every status event of a job back from JetStream.
func statusEvents(t *testing.T, ctx context.Context, ws, name string) []events.JobPhaseData {
	t.Helper()
	evs, out := streamEvents[events.JobPhaseData](t, ctx, env.events, events.JobStatusSubject(ws, name))
	for _, ev := range evs {
		if ev.Type != events.TypeJobPhase {
			t.Fatalf("read status events: unexpected event type %q", ev.Type)
		}
	}
	return out
}

// streamEvents reads every event on subject back from the events stream in JetStream,
// and each event's data decoded as T.
func streamEvents[T any](t *testing.T, ctx context.Context, js *jetstream.Client, subject string) ([]events.Event, []T) {
	t.Helper()
	var evs []events.Event
	var out []T
	err := js.ReadUntil(ctx, jetstream.EventsStream, subject, nil, func(_ string, data []byte) error {
		var ev events.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return err
		}
		var d T
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		evs = append(evs, ev)
		out = append(out, d)
		return nil
	})
	if err != nil {
		t.Fatalf("read events on %s: %v", subject, err)
	}
	return evs, out
}

func phasesOf(evs []events.JobPhaseData) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Phase
	}
	return out
}

// jobLogs returns every forwarded log record of a job.
func jobLogs(t *testing.T, ctx context.Context, ws, name string) []events.LogRecord {
	t.Helper()
	return itest.JobLogs(t, ctx, env.api, ws, name)
}

// phaseList is the phases of a job's timeline.
func phaseList(st schemas.JobStatus) []string {
	out := make([]string, len(st.Timeline))
	for i, e := range st.Timeline {
		out[i] = string(e.Phase)
	}
	return out
}
