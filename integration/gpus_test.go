package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// gpuJob is a job of one replica asking for gpus GPUs that prints the devices it was
// given and then waits until the file release exists.
func gpuJob(ws, name string, gpus int, release string) string {
	script := fmt.Sprintf(`echo "cuda=$CUDA_VISIBLE_DEVICES"; while [ ! -e %s ]; do sleep 0.2; done`, release)
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  framework: custom
  command: [sh, -c, %q]
  roles: {worker: {replicas: 1, resources: {gpu: %d}}}
`, name, ws, script, gpus)
}

// On a stack whose local backend has 4 (simulated) GPUs, as `dlc up --gpus 4` starts
// it: jobs running at the same time get disjoint CUDA_VISIBLE_DEVICES; a job that does
// not fit waits Queued with the reason (and starts nothing) instead of oversubscribing,
// then runs once the GPUs it needs are free. The stack is this test's own, so the
// shared stack's jobs never compete for the GPUs.
func TestLocalGPUsQueueAndDisjointDevices(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	e := itest.StartStack(t, ctx, embedded.Config{WorkDir: env.dir, GPUs: 4})
	c := itest.AdminClient(t, e)
	ws := workspace(t)
	release := filepath.Join(t.TempDir(), "release")
	wait := func(name, what string, cond func(*api.Job) bool) *api.Job {
		t.Helper()
		return itest.WaitJob(t, ctx, c, ws, name, what, cond)
	}
	isRunning := func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning }
	devices := func(name string) []string {
		t.Helper()
		var out []string
		err := c.Logs(ctx, ws, name, dlc.LogOptions{}, func(r events.LogRecord) error {
			if v, ok := strings.CutPrefix(r.Line, "cuda="); ok {
				out = strings.Split(v, ",")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("logs of %s: %v", name, err)
		}
		return out
	}

	itest.Submit(t, ctx, c, gpuJob(ws, "three", 3, release))
	wait("three", "Running", isRunning)
	itest.Submit(t, ctx, c, gpuJob(ws, "one", 1, release))
	wait("one", "Running", isRunning)

	// All four GPUs are taken: a second job of 3 waits Queued, with the reason.
	itest.Submit(t, ctx, c, gpuJob(ws, "three-more", 3, release))
	queued := wait("three-more", "Queued", func(j *api.Job) bool { return j.Status.Phase == schemas.JobQueued })
	if queued.Status.Reason != "InsufficientResources" || queued.Status.Message != "waiting for 3 GPUs: 0 of 4 free" {
		t.Fatalf("queued job: %s/%s: %q", queued.Status.Phase, queued.Status.Reason, queued.Status.Message)
	}
	if len(queued.Status.Replicas) != 0 {
		t.Errorf("the queued job has replicas: %+v", queued.Status.Replicas)
	}
	// The running jobs' devices, read while both run, are disjoint. A replica's first
	// line reaches the log stream a flush interval after it is written: wait for it.
	var three, one []string
	testutil.Eventually(t, itest.Left(ctx), "both running jobs to log their devices", func() bool {
		three, one = devices("three"), devices("one")
		return len(three) > 0 && len(one) > 0
	}, itest.PollInterval)
	if len(three) != 3 || len(one) != 1 || slices.ContainsFunc(three, func(d string) bool { return slices.Contains(one, d) }) {
		t.Fatalf("devices of the running jobs: %q and %q, want 3 and 1, disjoint", three, one)
	}
	all := append(slices.Clone(three), one...)
	slices.Sort(all)
	if !slices.Equal(all, []string{"0", "1", "2", "3"}) {
		t.Errorf("devices in use %q, want 0 to 3", all)
	}

	// The first jobs end: the queued one runs, on three of the freed GPUs.
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"three", "one", "three-more"} {
		j := wait(name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
		if j.Status.Phase != schemas.JobSucceeded {
			t.Errorf("%s ended %s: %s", name, j.Status.Phase, j.Status.Message)
		}
	}
	if d := devices("three-more"); len(d) != 3 {
		t.Errorf("the formerly queued job saw devices %q, want 3", d)
	}
	j := wait("three-more", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	phases := phaseList(j.Status)
	q := slices.Index(phases, string(schemas.JobQueued))
	if q < 0 || !slices.Contains(phases[q:], string(schemas.JobLaunching)) || !slices.Contains(phases[q:], string(schemas.JobRunning)) {
		t.Errorf("timeline %v: want Queued, then Launching and Running", phases)
	}
}
