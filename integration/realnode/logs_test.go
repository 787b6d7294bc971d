package realnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend/kube"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// A container's log, read from the real kubelet while it is written: a client following
// the job (dlc job logs -f) sees the lines as they come, the worker that forwards them is
// SIGKILLed mid-run and started again, and the job's log ends with every line exactly
// once, in order, the new worker going on from where the old one stopped.
func TestLogsFollowAcrossAWorkerRestart(t *testing.T) {
	ctx := itest.Context(t, 5*time.Minute)
	const ws, name, lines = "rn-logs", "counter", 60
	submit(t, ctx, shellJob(name, ws, env.training.Root.Ref,
		fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo line-$i; i=$((i+1)); sleep 0.2; done`, lines), ""))
	followed := make(chan []string, 1)
	go func() {
		var got []string
		err := env.api.Logs(ctx, ws, name, dlc.LogOptions{Follow: true}, func(r events.LogRecord) error {
			got = append(got, r.Line)
			return nil
		})
		if err != nil {
			t.Errorf("follow: %v", err)
		}
		followed <- got
	}()
	itest.WaitJob(t, ctx, env.api, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	// Once some lines are through, the worker dies without a word and comes back.
	testutil.Eventually(t, itest.Left(ctx), "the first lines forwarded", func() bool { return len(jobLogs(t, ctx, ws, name)) >= 10 }, itest.PollInterval)
	stopWorker()
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, ctx, ws, name)
	var want []string
	for i := 1; i <= lines; i++ {
		want = append(want, fmt.Sprintf("line-%d", i))
	}
	var stored []string
	for _, r := range jobLogs(t, ctx, ws, name) {
		stored = append(stored, r.Line)
	}
	if fmt.Sprint(stored) != fmt.Sprint(want) {
		t.Errorf("the job's log after the worker restart:\n%v\nwant line-1..line-%d, each once", stored, lines)
	}
	select {
	case got := <-followed:
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the follower saw:\n%v\nwant line-1..line-%d, each once", got, lines)
		}
	case <-ctx.Done():
		t.Fatal("the follower did not end with the job")
	}
}

// A training container SIGKILLed (through its node's containerd) while a client follows
// the job's log. The backend runs pods with restartPolicy Never, so the kubelet does not
// restart the container: the pod fails with exit code 137, the job's workflow stops the
// rest of the gang and runs the whole gang again as attempt 1. What a user following
// the job sees (the API's follow and `dlc job logs -f`): every line the killed container
// wrote, as its kubelet still serves it after the kill; every line of its peer, which the
// gang's stop ended with SIGTERM, up to the line its trap printed; then every line of
// attempt 1's containers; each once, and the same as the job's stored log.
func TestLogsFollowAcrossAContainerKill(t *testing.T) {
	t.Parallel()
	reserve(t, "100m", "100m")
	ctx := itest.Context(t, 6*time.Minute)
	const ws, name, again = "rn-logs-kill", "killed", 30
	// Attempt 0 would print for two minutes; attempt 1 prints 30 lines and ends.
	script := fmt.Sprintf(`n=600; [ "$DLC_ATTEMPT" = 0 ] || n=%d; i=0
trap 'echo "attempt=$DLC_ATTEMPT terminated after line-$i"; exit 143' TERM
while [ $i -lt $n ]; do i=$((i+1)); echo "attempt=$DLC_ATTEMPT line-$i"; sleep 0.2; done`, again)
	submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  framework: custom
  image: %s
  command: [sh, -c, %q]
  roles:
    worker: {replicas: 2, resources: {cpu: "100m", memory: 64Mi}}
  faultTolerance: {maxRestarts: 1}
  timeout: 5m
`, name, ws, env.training.Root.Ref, script))

	type key struct {
		attempt int
		replica string // role-index
	}
	var (
		mu       sync.Mutex
		followed []events.LogRecord
	)
	followedOf := func(k key) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, r := range followed {
			if r.Attempt == k.attempt && fmt.Sprintf("%s-%d", r.Role, r.Index) == k.replica {
				out = append(out, r.Line)
			}
		}
		return out
	}
	apiDone := make(chan error, 1)
	go func() {
		apiDone <- env.api.Logs(ctx, ws, name, dlc.LogOptions{Follow: true}, func(r events.LogRecord) error {
			mu.Lock()
			followed = append(followed, r)
			mu.Unlock()
			return nil
		})
	}()
	cli := exec.CommandContext(ctx, env.dlcBin, "--server", env.stack.APIURL, "-w", ws, "job", "logs", "-f", name)
	cli.Env = append(os.Environ(), "DLC_TOKEN="+env.stack.AdminToken)
	var cliOut, cliErr bytes.Buffer
	cli.Stdout, cli.Stderr = &cliOut, &cliErr
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	cliDone := make(chan error, 1)
	go func() { cliDone <- cli.Wait() }()

	itest.WaitJob(t, ctx, env.api, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	var victim, peer corev1.Pod
	for _, p := range jobPods(t, ctx, ws, name) {
		switch p.Labels["opendlc.io/replica-index"] {
		case "0":
			peer = p
		case "1":
			victim = p
		}
	}
	if victim.Name == "" || peer.Name == "" {
		t.Fatal("attempt 0's two pods not found")
	}
	// The follow is live: some of the victim's lines have arrived before the kill.
	testutil.Eventually(t, itest.Left(ctx), "10 lines of worker-1 followed", func() bool { return len(followedOf(key{0, "worker-1"})) >= 10 }, itest.PollInterval)
	node, err := env.cluster.KillContainer(ctx, ws, victim.Name, kube.ContainerName)
	if err != nil {
		t.Fatal(err)
	}
	// The fault happened: the kubelet reports the container dead by SIGKILL, not restarted.
	var killed corev1.ContainerStatus
	testutil.Eventually(t, itest.Left(ctx), "the kubelet reports the killed container", func() bool {
		p, err := env.cluster.Client.CoreV1().Pods(ws).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == kube.ContainerName && s.State.Terminated != nil {
				killed = s
				return true
			}
		}
		return false
	}, itest.PollInterval)
	if killed.State.Terminated.ExitCode != 137 || killed.RestartCount != 0 {
		t.Fatalf("container of %s: exit code %d after %d restarts, want 137 and no restart", victim.Name, killed.State.Terminated.ExitCode, killed.RestartCount)
	}
	// What the killed container wrote, as its kubelet serves it (the pod stays, Failed).
	raw, err := env.cluster.Client.CoreV1().Pods(ws).GetLogs(victim.Name, &corev1.PodLogOptions{Container: kube.ContainerName}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("the killed container's log from the kubelet: %v", err)
	}
	victimLines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	t.Logf("killed %s's container on %s after %d lines", victim.Name, node, len(victimLines))

	j := mustSucceed(t, ctx, ws, name)
	st := j.Status
	if st.Restarts != 1 || len(st.Attempts) != 2 || st.Attempts[0].Replica != victim.Name || !strings.Contains(st.Attempts[0].Message, "137") {
		t.Fatalf("restarts %d, attempts %+v: want attempt 0 ended by %s's exit code 137 and one restart", st.Restarts, st.Attempts, victim.Name)
	}
	for _, p := range jobPods(t, ctx, ws, name) {
		if p.UID == victim.UID || p.UID == peer.UID {
			continue
		}
		if p.Labels["opendlc.io/attempt"] != "1" {
			t.Errorf("pod %s of attempt %s, want only attempt 1's beside attempt 0's", p.Name, p.Labels["opendlc.io/attempt"])
		}
	}
	select {
	case err := <-apiDone:
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the API's follow did not end with the job")
	}
	select {
	case err := <-cliDone:
		if err != nil {
			t.Fatalf("dlc job logs -f: %v\n%s", err, cliErr.String())
		}
	case <-ctx.Done():
		t.Fatal("dlc job logs -f did not end with the job")
	}

	count := func(attempt, n int) []string {
		var out []string
		for i := 1; i <= n; i++ {
			out = append(out, fmt.Sprintf("attempt=%d line-%d", attempt, i))
		}
		return out
	}
	// The killed container's lines: line-1.. line-k, exactly what the kubelet kept.
	if k := len(victimLines); k < 10 || fmt.Sprint(victimLines) != fmt.Sprint(count(0, k)) {
		t.Fatalf("the killed container's own log: %q, want attempt=0 line-1.. (10 or more)", victimLines)
	}
	peerLines := followedOf(key{0, "worker-0"})
	want := map[key][]string{
		{0, "worker-1"}: victimLines,
		{1, "worker-0"}: count(1, again),
		{1, "worker-1"}: count(1, again),
	}
	// The peer, stopped with the gang: line-1..line-m, then its trap's last word.
	if m := len(peerLines) - 1; m < 1 || fmt.Sprint(peerLines) != fmt.Sprint(append(count(0, m), fmt.Sprintf("attempt=0 terminated after line-%d", m))) {
		t.Errorf("attempt 0's worker-0 (stopped with the gang), followed:\n%q\nwant attempt=0 line-1..line-m and its trap's line", peerLines)
	}
	for k, w := range want {
		if got := followedOf(k); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("attempt %d's %s, followed:\n%q\nwant\n%q", k.attempt, k.replica, got, w)
		}
	}
	// The stored log holds the same records as the follow, in the same order; the
	// CLI printed each of them once, as [role-index] line, the attempt named from the
	// second one on.
	mu.Lock()
	defer mu.Unlock()
	var stored, live, printed []string
	for _, r := range jobLogs(t, ctx, ws, name) {
		stored = append(stored, fmt.Sprintf("a%d %s %s", r.Attempt, r.Replica, r.Line))
		prefix := fmt.Sprintf("%s-%d", r.Role, r.Index)
		if r.Attempt > 0 {
			prefix += fmt.Sprintf(" attempt %d", r.Attempt)
		}
		printed = append(printed, fmt.Sprintf("[%s] %s", prefix, r.Line))
	}
	for _, r := range followed {
		live = append(live, fmt.Sprintf("a%d %s %s", r.Attempt, r.Replica, r.Line))
	}
	if fmt.Sprint(stored) != fmt.Sprint(live) {
		t.Errorf("the follow (%d records) and the stored log (%d) differ:\nfollowed %q\nstored   %q", len(live), len(stored), live, stored)
	}
	if got := strings.Split(strings.TrimSuffix(cliOut.String(), "\n"), "\n"); fmt.Sprint(got) != fmt.Sprint(printed) {
		t.Errorf("dlc job logs -f printed:\n%q\nwant the stored log:\n%q", got, printed)
	}
}
