package kube

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/backend"
	kubebackend "github.com/opendlc/opendlc/backend/kube"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// Pod logs on the control plane: kwok serves each pod's container log from files the
// test writes (kubestack.SetPodLogs), through the API server's pods/log, as a kubelet
// would. The worker follows them into the job's log stream (JetStream), and the tests
// read that back through the API.

// logJob is a one-replica job of workspace ws whose pod runs until the test completes
// it; its pod is <name>-worker-0-a0.
func logJob(ws, name string) string {
	return kubeJob(name, ws, "", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 1}}
`)
}

// podLog is a container log file the test writes, with strictly increasing line times
// unless a line asks for the previous one's.
type podLog struct {
	t    *testing.T
	path string
	last time.Time
}

func newPodLog(t *testing.T, dir, name string) *podLog {
	return &podLog{t: t, path: filepath.Join(dir, name), last: time.Now().UTC()}
}

// write appends lines, each a millisecond after the one before; a line starting with
// "=" has the time of the one before (and the text after the "=").
func (l *podLog) write(lines ...string) {
	l.t.Helper()
	var recs []kubestack.LogRecord
	for _, text := range lines {
		if same, ok := strings.CutPrefix(text, "="); ok {
			text = same
		} else {
			l.last = l.last.Add(time.Millisecond + 7) // odd nanoseconds, as a runtime's
		}
		recs = append(recs, kubestack.LogRecord{Time: l.last, Text: text})
	}
	if err := kubestack.AppendLog(l.path, recs...); err != nil {
		l.t.Fatal(err)
	}
}

// readJobLog reads the job's forwarded log through the API.
func readJobLog(ctx context.Context, ws, name string) ([]events.LogRecord, error) {
	var recs []events.LogRecord
	err := env.api.Logs(ctx, ws, name, dlc.LogOptions{}, func(r events.LogRecord) error {
		recs = append(recs, r)
		return nil
	})
	return recs, err
}

// lines are the texts of records, gap records marked "GAP".
func lines(recs []events.LogRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Line
		if r.Stream == backend.StreamGap {
			out[i] = "GAP"
		}
	}
	return out
}

// waitLog polls the job's log until it holds want (texts, in order) and returns it.
// Right after a worker restart the API answers 503 for a while: it reads the job's
// status with a workflow query, which waits for the dead worker's sticky queue to
// time out (5 s) and then for the new worker to poll; Temporal may also cancel the
// query on its side meanwhile. waitLog retries those.
func waitLog(t *testing.T, ctx context.Context, ws, name string, want []string) []events.LogRecord {
	t.Helper()
	var recs []events.LogRecord
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("job log %q", want), func() error {
		var err error
		recs, err = readJobLog(ctx, ws, name)
		switch {
		case apiStatus(err) == http.StatusServiceUnavailable:
			t.Logf("job log: %v (retrying)", err)
			return err
		case err != nil:
			t.Fatal(err)
		case !slices.Equal(lines(recs), want):
			return fmt.Errorf("job log %q", lines(recs))
		}
		return nil
	}, 200*time.Millisecond)
	return recs
}

// checkSeq asserts the records are numbered 1, 2, 3... with no gap or repeat.
func checkSeq(t *testing.T, recs []events.LogRecord) {
	t.Helper()
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Errorf("record %d (%q) has seq %d", i, r.Line, r.Seq)
		}
	}
}

// runningPod waits until the job's only pod runs and returns it.
func runningPod(t *testing.T, ctx context.Context, ns, job string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	testutil.Eventually(t, itest.Left(ctx), "the pod Running", func() bool {
		pods := jobPods(t, ctx, ns, job)
		if len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning {
			pod = pods[0]
			return true
		}
		return false
	}, itest.PollInterval)
	return pod
}

// A running pod's log is followed into the job's log as it is written; when its
// container restarts, the end of the previous run's log (written just before, and
// read with previous=true) comes before the new run's, nothing twice, also when the
// restart happens while the worker is away; when the pod finishes, what it wrote last
// is drained.
func TestPodLogFollowedThroughContainerRestart(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-logs-follow", "talk"
	pod := name + "-worker-0-a0"
	createNamespace(t, ctx, ws)
	dir := t.TempDir()
	first, second := newPodLog(t, dir, "run0.log"), newPodLog(t, dir, "run1.log")
	first.write("step 1", "step 2", "=step 2 again, same nanosecond")
	if err := env.cluster.SetPodLogs(ctx, ws, pod, kubestack.PodLogs{File: first.path}); err != nil {
		t.Fatal(err)
	}
	submit(t, ctx, logJob(ws, name))
	runningPod(t, ctx, ws, name)
	waitLog(t, ctx, ws, name, []string{"step 1", "step 2", "step 2 again, same nanosecond"})

	first.write("step 3")
	waitLog(t, ctx, ws, name, []string{"step 1", "step 2", "step 2 again, same nanosecond", "step 3"})

	// The container restarts: its last line written just before, the new run's log
	// in a file of its own, the old one served as previous.
	first.write("dying words")
	second.last = first.last
	second.write("restarted", "step 4")
	if err := env.cluster.SetPodLogs(ctx, ws, pod, kubestack.PodLogs{File: second.path, PreviousFile: first.path}); err != nil {
		t.Fatal(err)
	}
	pods := env.cluster.Client.CoreV1().Pods(ws)
	testutil.Eventually(t, itest.Left(ctx), "kwok serving the previous run", func() bool {
		b, err := pods.GetLogs(pod, &corev1.PodLogOptions{Container: kubebackend.ContainerName, Previous: true}).DoRaw(ctx)
		return err == nil && strings.HasSuffix(string(b), "dying words\n")
	}, itest.PollInterval)
	restartContainer(t, ctx, ws, pod)
	want := []string{"step 1", "step 2", "step 2 again, same nanosecond", "step 3", "dying words", "restarted", "step 4"}
	waitLog(t, ctx, ws, name, want)

	// It restarts again while the worker is away: the replacement worker reads the
	// end of the previous run from its log (previous=true) before the new run's.
	third := newPodLog(t, dir, "run2.log")
	restartWorker(t, func() {
		second.write("dying again")
		third.last = second.last
		third.write("restarted again")
		if err := env.cluster.SetPodLogs(ctx, ws, pod, kubestack.PodLogs{File: third.path, PreviousFile: second.path}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, itest.Left(ctx), "kwok serving the second run as previous", func() bool {
			b, err := pods.GetLogs(pod, &corev1.PodLogOptions{Container: kubebackend.ContainerName, Previous: true}).DoRaw(ctx)
			return err == nil && strings.HasSuffix(string(b), "dying again\n")
		}, itest.PollInterval)
		restartContainer(t, ctx, ws, pod)
	})
	want = append(want, "dying again", "restarted again")
	waitLog(t, ctx, ws, name, want)

	third.write("last words")
	completePod(t, ctx, ws, pod)
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s: %s", j.Status.Phase, j.Status.Message)
	}
	recs := waitLog(t, ctx, ws, name, append(want, "last words"))
	checkSeq(t, recs)
	if got := recs[2].Time; !got.Equal(recs[1].Time) {
		t.Errorf("lines of one nanosecond have times %s and %s", recs[1].Time, got)
	}
	for _, r := range recs {
		if r.Stream != "stdout" || r.Replica != pod || r.Role != "worker" || r.Index != 0 {
			t.Errorf("record %+v", r)
		}
	}
}

// restartContainer reports the pod's container restarted once, as a kubelet would
// (kwok does not restart containers itself).
func restartContainer(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	pods := env.cluster.Client.CoreV1().Pods(ns)
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
	}
	cs := &p.Status.ContainerStatuses[0]
	cs.RestartCount++
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
	cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "the restart count to stay", func() bool {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.ContainerStatuses[0].RestartCount == cs.RestartCount
	}, itest.PollInterval)
}

// The worker is killed while the pod writes; the lines written meanwhile, one of
// them with the very time of the last line forwarded, are forwarded once the
// replacement worker resumes, none lost and none twice, numbered on. Then the log is
// rotated while the worker is away again, taking lines nobody read: the job's log
// says so with a gap record, and goes on with the new file.
func TestPodLogResumesAfterWorkerRestart(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-logs-resume", "talk"
	pod := name + "-worker-0-a0"
	createNamespace(t, ctx, ws)
	dir := t.TempDir()
	log := newPodLog(t, dir, "0.log")
	log.write("epoch 1", "epoch 2")
	if err := env.cluster.SetPodLogs(ctx, ws, pod, kubestack.PodLogs{File: log.path}); err != nil {
		t.Fatal(err)
	}
	submit(t, ctx, logJob(ws, name))
	runningPod(t, ctx, ws, name)
	want := []string{"epoch 1", "epoch 2"}
	waitLog(t, ctx, ws, name, want)

	restartWorker(t, func() {
		log.write("=epoch 2, same nanosecond", "epoch 3", "=epoch 3", "epoch 4")
	})
	want = append(want, "epoch 2, same nanosecond", "epoch 3", "epoch 3", "epoch 4")
	checkSeq(t, waitLog(t, ctx, ws, name, want))

	// Rotated while nobody follows: what was written to the old file after the last
	// line forwarded is gone from the pod's log.
	restartWorker(t, func() {
		log.write("lost in rotation")
		if err := os.Rename(log.path, log.path+".1"); err != nil {
			t.Fatal(err)
		}
		log.write("epoch 5")
	})
	want = append(want, "GAP", "epoch 5")
	recs := waitLog(t, ctx, ws, name, want)
	checkSeq(t, recs)
	gap := recs[len(recs)-2]
	if !strings.HasPrefix(gap.Line, backend.GapPrefix) || !strings.Contains(gap.Line, "rotated") || !gap.Time.Equal(recs[len(recs)-3].Time) {
		t.Errorf("gap record %+v", gap)
	}
	t.Logf("gap record: %s", gap.Line)

	log.write("done")
	completePod(t, ctx, ws, pod)
	waitJob(t, ctx, ws, name, "terminal", terminal)
	checkSeq(t, waitLog(t, ctx, ws, name, append(want, "done")))
}

// restartWorker kills the worker, runs meanwhile, and starts a new one (also when
// meanwhile fails the test). The API cannot serve a job's log meanwhile: it queries the
// job's workflow, which needs a worker.
func restartWorker(t *testing.T, meanwhile func()) {
	t.Helper()
	stopWorker()
	defer func() {
		if err := startWorker(); err != nil {
			t.Fatal(err)
		}
	}()
	if env.worker.ProcessState == nil || env.worker.ProcessState.Success() {
		t.Fatalf("the worker was not killed: %v", env.worker.ProcessState)
	}
	meanwhile()
}

// A finished pod whose log cannot be read (kwok has no file for it) leaves a gap
// record in the job's log, saying why, and a Warning event on the pod.
func TestPodLogGapWhenUnreadable(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-logs-gap", "mute"
	pod := name + "-worker-0-a0"
	submit(t, ctx, kwokJob(name, ws, "1s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: 1}}
`))
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s: %s", j.Status.Phase, j.Status.Message)
	}
	recs := waitLog(t, ctx, ws, name, []string{"GAP"})
	if r := recs[0]; r.Seq != 1 || r.Replica != pod ||
		!strings.HasPrefix(r.Line, backend.GapPrefix+"the log of pod "+ws+"/"+pod+" could not be read after it finished") {
		t.Errorf("gap record %+v", r)
	}
	t.Logf("gap record: %s", recs[0].Line)
	var ev *corev1.Event
	testutil.Eventually(t, itest.Left(ctx), "the log gap event", func() bool {
		var err error
		ev, err = env.cluster.Client.CoreV1().Events(ws).Get(ctx, pod+".log-gap", metav1.GetOptions{})
		return err == nil
	}, itest.PollInterval)
	if ev.Type != corev1.EventTypeWarning || ev.Reason != kubebackend.EventReasonLogGap || ev.InvolvedObject.Name != pod ||
		!strings.Contains(ev.Message, "could not be read") {
		t.Errorf("event %+v", ev)
	}
}
