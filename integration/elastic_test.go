package integration

// An elastic PyTorch job on the local backend with a real torchrun (Debian's torch
// 1.13, c10d rendezvous, gloo on CPU): one replica's process is SIGKILLed mid-run, the
// workflow replaces that replica alone, the surviving replica's torchrun agent (same
// pid) restarts its workers and the c10d rendezvous re-forms with the replacement; the
// job succeeds on its first attempt.

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

var (
	elasticJoined = regexp.MustCompile(`elastic joined: rank=(\d+) world=(\d+) restart=(\d+)`)
	elasticStep   = regexp.MustCompile(`elastic step=(\d+) rank=(\d+) world=(\d+) sum=(\d+) restart=(\d+)`)
	elasticDone   = regexp.MustCompile(`elastic done: rank=(\d+) world=(\d+) restart=(\d+)`)
)

func elasticTorchJob(t *testing.T, ws, name string) string {
	prog, err := filepath.Abs(filepath.Join("testdata", "elastic_train.py"))
	if err != nil {
		t.Fatal(err)
	}
	// PET_NNODES=2:3, PET_RDZV_* and PET_RDZV_CONF=is_host=... come from OpenDLC; the
	// command adds a short last-call timeout to the same rendezvous configuration.
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  framework: pytorch
  command:
    - sh
    - -c
    - >-
      echo pid=$$ nnodes=$PET_NNODES rdzv=$PET_RDZV_BACKEND conf=$PET_RDZV_CONF max_restarts=$PET_MAX_RESTARTS;
      exec /usr/bin/python3 -m torch.distributed.run --redirects 1 --tee 1
      --rdzv_conf "$PET_RDZV_CONF,last_call_timeout=2" --monitor_interval 1
      %s --steps 40 --step-sleep 0.25
  env: [{name: OMP_NUM_THREADS, value: "1"}]
  elastic: {minReplicas: 2, maxReplicas: 3}
  roles:
    worker: {replicas: 2, resources: {cpu: "1", memory: 1Gi}}
  faultTolerance: {maxRestarts: 2}
  timeout: 5m
`, name, ws, prog)
}

// replicaPids are the pids each replica index printed (one per process started).
func replicaPids(recs []eventsRecord) map[int][]int {
	out := map[int][]int{}
	for _, r := range recs {
		if v, ok := strings.CutPrefix(r.line, "pid="); ok {
			pid, _ := strconv.Atoi(strings.Fields(v)[0])
			out[r.index] = append(out[r.index], pid)
		}
	}
	return out
}

// eventsRecord is the part of a log record these tests read.
type eventsRecord struct {
	index int
	line  string
}

func elasticLogs(t *testing.T, ctx context.Context, ws, name string) []eventsRecord {
	t.Helper()
	var out []eventsRecord
	for _, r := range jobLogs(t, ctx, ws, name) {
		out = append(out, eventsRecord{index: r.Index, line: r.Line})
	}
	return out
}

func TestElasticTorchrunReplace(t *testing.T) {
	requireTorch(t)
	ctx := itest.Context(t, 6*time.Minute)
	ws := workspace(t)
	const name = "elastic"
	submit(t, ctx, elasticTorchJob(t, ws, name))

	// Both replicas train in a world of 2.
	var pids map[int][]int
	testutil.Eventually(t, itest.Left(ctx), "the replicas to train together", func() error {
		recs := elasticLogs(t, ctx, ws, name)
		pids = replicaPids(recs)
		stepped := map[int]bool{}
		for _, r := range recs {
			if m := elasticStep.FindStringSubmatch(r.line); m != nil && m[3] == "2" && m[1] == "3" {
				stepped[r.index] = true
			}
		}
		if len(pids[0]) != 1 || len(pids[1]) != 1 || !stepped[0] || !stepped[1] {
			return fmt.Errorf("pids %v, stepped %v", pids, stepped)
		}
		return nil
	}, 200*time.Millisecond)
	victim := pids[1][0]
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill worker-1's torchrun (pid %d): %v", victim, err)
	}
	t.Logf("killed worker-1's torchrun agent, pid %d; worker-0's is pid %d", victim, pids[0][0])

	j := itest.WaitJob(t, ctx, env.api, ws, name, "worker-1 replaced", func(j *api.Job) bool {
		return j.Status.Elastic != nil && j.Status.Elastic.Replacements == 1 || j.Status.Phase.Terminal()
	})
	if j.Status.Elastic == nil || j.Status.Elastic.Replacements != 1 {
		t.Fatalf("not replaced: %s %s; timeline %v", j.Status.Phase, j.Status.Message, phaseList(j.Status))
	}
	st := mustSucceed(t, ctx, ws, name).Status

	recs := elasticLogs(t, ctx, ws, name)
	pids = replicaPids(recs)
	// The fault happened, and only worker-1 was started again.
	if len(pids[1]) != 2 || pids[1][0] != victim || pids[1][1] == victim {
		t.Errorf("worker-1 pids %v, want %d then a new one", pids[1], victim)
	}
	if len(pids[0]) != 1 {
		t.Errorf("worker-0 pids %v, want one: its torchrun agent must run on", pids[0])
	}
	if st.Attempt != 0 || len(st.Attempts) != 1 || st.Restarts != 1 {
		t.Errorf("attempt %d, %d attempts, %d restarts: want the first attempt only, one restart", st.Attempt, len(st.Attempts), st.Restarts)
	}
	phases := phaseList(st)
	first := slices.Index(phases, string(schemas.JobRunning))
	for _, p := range phases[first+1 : len(phases)-1] {
		if p != string(schemas.JobRunning) {
			t.Errorf("the job left Running: %v", phases)
		}
	}

	// What the training loop saw: worker-0's workers joined a world of 2, then, after
	// the loss, a new world of 2 with the replacement (a higher restart count), and both
	// replicas finished in it.
	joined := map[int][]string{}
	done := map[int][]string{}
	for _, r := range recs {
		if m := elasticJoined.FindStringSubmatch(r.line); m != nil {
			joined[r.index] = append(joined[r.index], "world="+m[2]+" restart="+m[3])
		}
		if m := elasticDone.FindStringSubmatch(r.line); m != nil {
			done[r.index] = append(done[r.index], "world="+m[2]+" restart="+m[3])
		}
	}
	if len(joined[0]) < 2 || joined[0][0] != "world=2 restart=0" || !strings.HasPrefix(joined[0][len(joined[0])-1], "world=2 restart=") ||
		joined[0][len(joined[0])-1] == "world=2 restart=0" {
		t.Errorf("worker-0 joined %v: want world 2 at restart 0, then world 2 again after a restart", joined[0])
	}
	if len(done[0]) != 1 || len(done[1]) != 1 || !strings.HasPrefix(done[0][0], "world=2 ") || !strings.HasPrefix(done[1][0], "world=2 ") {
		t.Errorf("finished: worker-0 %v, worker-1 %v; want both once, in a world of 2", done[0], done[1])
	}
	t.Logf("worker-0 joined %v, worker-1 joined %v; done %v %v; timeline %v", joined[0], joined[1], done[0], done[1], phases)
}
