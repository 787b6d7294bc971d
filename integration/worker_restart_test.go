package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
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

var buildDLC = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(env.dir, "dlc")
	return bin, itest.Build(context.Background(), "./cmd/dlc", bin)
})

// dlcBinary is the package's dlc build (buildDLC), failing the test if it failed.
func dlcBinary(t *testing.T) string {
	t.Helper()
	bin, err := buildDLC()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// workerProc is a `dlc worker` process with the local backend.
type workerProc struct {
	cmd *exec.Cmd
	log *os.File
}

func startWorker(t *testing.T, e *embedded.Embedded, stateDir string) *workerProc {
	t.Helper()
	return startWorkerEnv(t, e, stateDir)
}

// startWorkerEnv is startWorker with variables added to the worker's environment.
func startWorkerEnv(t *testing.T, e *embedded.Embedded, stateDir string, extraEnv ...string) *workerProc {
	t.Helper()
	return startWorkerArgs(t, e, stateDir, extraEnv)
}

// startWorkerArgs is startWorker with variables added to the worker's environment and
// arguments added to its command line (later ones override itest.WorkerArgs').
func startWorkerArgs(t *testing.T, e *embedded.Embedded, stateDir string, extraEnv []string, extraArgs ...string) *workerProc {
	t.Helper()
	bin := dlcBinary(t)
	logf, err := os.CreateTemp(t.TempDir(), "worker-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, itest.WorkerArgs(e, append([]string{"--state-dir", stateDir, "--workdir", env.dir}, extraArgs...)...)...)
	cmd.Env = append(itest.WorkerEnv(e), extraEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{cmd: cmd, log: logf}
	t.Cleanup(func() { w.kill() })
	return w
}

// workerStack starts a stack of the test's own with no worker in it, so that no other
// worker polls its task queue, and a `dlc worker` process on it with extraArgs; the
// worker keeps its local backend's state in stateDir, where the next worker started
// carries on.
func workerStack(t *testing.T, ctx context.Context, extraArgs ...string) (e *embedded.Embedded, stateDir string, first *workerProc) {
	t.Helper()
	dir := t.TempDir()
	e = itest.StartStack(t, ctx, embedded.Config{Dir: filepath.Join(dir, "stack"), NoWorker: true, WorkDir: env.dir})
	stateDir = filepath.Join(dir, "local")
	return e, stateDir, startWorkerArgs(t, e, stateDir, nil, extraArgs...)
}

func (w *workerProc) kill() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		_ = w.cmd.Wait()
	}
}

// A worker SIGKILLed in the middle of a 4-replica job that prints 100,000 lines: the
// replicas keep running, a new worker carries on, the job succeeds, the stream holds
// exactly one status event per transition in order, and every line arrives exactly
// once, in order per replica.
func TestWorkerKilledMidJobLosesAndDuplicatesNothing(t *testing.T) {
	t.Parallel()
	// 100,000 lines, a 15 s takeover and reading them all back: about 30 s alone. The
	// read-back once took 41 s alone and ran two CI runs out of their time, when the
	// tests' OpenAPI check compiled a schema for every line (itest.bodySchema).
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// Its own stack, so that no other worker polls its task queue.
	start := time.Now()
	e, stateDir, first := workerStack(t, ctx)
	c := itest.AdminClient(t, e)
	t.Logf("wall time: stack and worker up in %s", time.Since(start).Round(time.Millisecond))

	const perReplica = 25000
	ws, name := "restart", "lines"
	if _, err := c.SubmitJob(ctx, []byte(itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  command: [sh, -c, 'i=0; while [ $i -lt %d ]; do i=$((i+1)); echo "line $i of $DLC_REPLICA"; if [ $((i %% 5000)) -eq 0 ]; then sleep 0.5; fi; done']
  roles: {worker: {replicas: 4}}
`, perReplica)))); err != nil {
		t.Fatal(err)
	}

	// Kill the worker once the job runs and some lines are forwarded, long before all.
	js, err := jetstream.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	testutil.Eventually(t, itest.Left(ctx), "the job to run with forwarded lines", func() bool {
		j, err := c.GetJob(ctx, ws, name)
		if err != nil || j.Status.Phase != schemas.JobRunning {
			return false
		}
		last, _ := js.LastMsg(ctx, jetstream.LogsStream, events.JobLogSubject(ws, name, "worker", 0))
		return last != nil
	}, 20*time.Millisecond)
	first.kill()
	killedAt := time.Now()
	t.Logf("worker killed at %s, %s after the start", killedAt.Format(time.StampMilli), killedAt.Sub(start).Round(time.Millisecond))
	startWorker(t, e, stateDir)

	final := itest.WaitJob(t, ctx, c, ws, name, "terminal after the worker restart", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if final.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s", final.Status.Phase, final.Status.Message)
	}
	t.Logf("wall time: job succeeded %s after the kill", time.Since(killedAt).Round(time.Millisecond))

	// Exactly one event per transition, in order.
	var phases []string
	err = js.ReadUntil(ctx, jetstream.EventsStream, events.JobStatusSubject(ws, name), nil, func(_ string, data []byte) error {
		phases = append(phases, phaseOf(t, data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, phases); diff != "" {
		t.Errorf("status events (-want +got):\n%s", diff)
	}

	// Every line exactly once, in order per replica.
	readStart := time.Now()
	next := map[int]int{} // replica index → next expected line number
	total := 0
	err = c.Logs(ctx, ws, name, dlc.LogOptions{}, func(r events.LogRecord) error {
		total++
		n := next[r.Index] + 1
		want := fmt.Sprintf("line %d of %d", n, r.Index)
		if r.Line != want || r.Seq != int64(n) {
			return fmt.Errorf("replica %d: got seq %d %q, want seq %d %q", r.Index, r.Seq, r.Line, n, want)
		}
		next[r.Index] = n
		return nil
	})
	t.Logf("wall time: %d lines read back in %s", total, time.Since(readStart).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if total != 4*perReplica {
		t.Errorf("%d lines forwarded, want %d (per replica: %v)", total, 4*perReplica, next)
	}
}

func phaseOf(t *testing.T, data []byte) string {
	t.Helper()
	var ev events.Event
	var d events.JobPhaseData
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Phase
}
