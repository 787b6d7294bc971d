package realnode

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
)

// What examples/pytorch/ddp/train.py prints.
var (
	allReduceLine = regexp.MustCompile(`first all_reduce: rank=(\d+) world=(\d+) sum=(\S+) expected=(\d+) backend=(\S+)`)
	paramsLine    = regexp.MustCompile(`params rank=(\d+) sha256=([0-9a-f]{64})`)
	finalLine     = regexp.MustCompile(`^final step=(\d+) loss=(\S+)$`)
	resumedLine   = regexp.MustCompile(`^resumed from (\S+) at step (\d+)$`)
)

// The DDP example (1 master + 2 workers, gloo) in containers of the training image on
// the two real nodes: the replicas rendezvous at the master's headless-Service name
// (resolved by the cluster DNS, over the pod network, across nodes), the Python library
// writes checkpoints to the stack's S3 from inside the pods, and once one is complete a
// worker's container is SIGKILLed through its node's containerd. The job restarts once,
// resumes from the newest complete checkpoint, and ends with every rank's first
// all-reduce right and identical parameters on every rank.
func TestDDPInContainersResumesAfterContainerKill(t *testing.T) {
	ctx := itest.Context(t, 10*time.Minute)
	const ws, name = "rn-ddp", "ddp"
	uri := "s3://dlc/workspaces/" + ws + "/checkpoints/" + name
	submit(t, ctx, job(name, ws, fmt.Sprintf(`  framework: pytorch
  command: [/usr/bin/python3, examples/pytorch/ddp/train.py]
  args: [--steps, "30", --step-sleep, "0.3", --hidden, "16", --checkpoint-every, "5"]
  env: [{name: PYTHONPATH, value: python}, {name: OMP_NUM_THREADS, value: "1"}]
  roles:
    master: {replicas: 1, resources: {cpu: 600m, memory: 1Gi}}
    worker: {replicas: 2, resources: {cpu: 600m, memory: 1Gi}}
  checkpoint: {uri: %q, keep: 3}
  faultTolerance: {maxRestarts: 1}
  timeout: 8m
`, uri)))

	store, err := checkpoint.NewStore(env.stack.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	var first checkpoint.Manifest
	testutil.Eventually(t, itest.Left(ctx), "a complete checkpoint written from inside the pods", func() bool {
		m, err := store.Latest(ctx, uri)
		first = m
		return err == nil
	}, itest.PollInterval)
	// The gang fits on one node (the restart avoids the node of the failure, and there
	// are two), but the spread places it over both (3 replicas of 0.6 CPU on nodes of
	// 2): the rendezvous and the all-reduces cross the bridge between them.
	pods := jobPods(t, ctx, ws, name)
	nodes := map[string]bool{}
	victim := ""
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
		if p.Labels["opendlc.io/role"] == "worker" && p.Labels["opendlc.io/replica-index"] == "1" {
			victim = p.Name
		}
	}
	if len(pods) != 3 || len(nodes) != 2 || victim == "" {
		t.Fatalf("pods %d on nodes %v (victim %q), want 3 on both real nodes", len(pods), nodes, victim)
	}
	node, err := env.cluster.KillContainer(ctx, ws, victim, kube.ContainerName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s's container on %s once step %d was complete", victim, node, first.Step)

	st := mustSucceed(t, ctx, ws, name).Status
	// The fault happened: attempt 0 ended with the killed replica, and a second ran.
	if st.Restarts != 1 || len(st.Attempts) != 2 {
		t.Fatalf("restarts %d, attempts %+v: want one restart", st.Restarts, st.Attempts)
	}
	a0, a1 := st.Attempts[0], st.Attempts[1]
	// The first failure seen may be the victim's (137) or a peer's whose collective
	// broke with it (gloo: connection closed); either ends the attempt.
	killedSeen := a0.Replica == victim && (strings.Contains(a0.Message, "137") || strings.Contains(a0.Message, "SIGKILL"))
	peerSeen := a0.Replica != victim && strings.Contains(a0.Message, "exit code")
	if !killedSeen && !peerSeen {
		t.Errorf("attempt 0: class %s replica %s message %q, want the end of %s by SIGKILL (137) or a peer's failure after it", a0.Class, a0.Replica, a0.Message, victim)
	}
	t.Logf("attempt 0 ended by %s (%s)", a0.Replica, a0.Class)
	_, step, err := checkpoint.ParseRef(a1.ResumedFrom)
	if err != nil || step < first.Step {
		t.Fatalf("attempt 1 resumed from %q (%v), want a checkpoint of %s at step >= %d", a1.ResumedFrom, err, uri, first.Step)
	}

	// What the framework computed, from the logs the worker read from the kubelets.
	runs := ddpRuns(jobLogs(t, ctx, ws, name))
	for attempt, rr := range runs {
		for rank := range 3 {
			if want := "world=3 sum=6 expected=6 backend=gloo"; rr.allReduce[rank] != want {
				t.Errorf("attempt %d rank %d: first all-reduce %q, want %q", attempt, rank, rr.allReduce[rank], want)
			}
		}
	}
	after := runs[1]
	if after == nil {
		t.Fatalf("no logs of attempt 1 (attempts with logs: %d)", len(runs))
	}
	if want := fmt.Sprintf("%s %d", a1.ResumedFrom, step); after.resumed != want {
		t.Errorf("attempt 1's rank 0 says it resumed from %q, want %q", after.resumed, want)
	}
	if len(after.steps) == 0 || after.steps[0] != step+1 || after.finalStep != 30 {
		t.Errorf("attempt 1 reported steps %v (final %d), want %d..30", after.steps, after.finalStep, step+1)
	}
	if len(after.params) != 3 || after.params[0] != after.params[1] || after.params[0] != after.params[2] {
		t.Errorf("attempt 1: parameter digests per rank %v, want 3 identical", after.params)
	}
}

// ddpRun is what examples/pytorch/ddp/train.py printed in one attempt of a job.
type ddpRun struct {
	allReduce map[int]string // rank → "world=W sum=S expected=E backend=B"
	params    map[int]string // rank → sha256 of its parameters at the end
	resumed   string         // rank 0's "<checkpoint> <step>" when it resumed
	steps     []int64        // the steps rank 0 reported, in order
	losses    []float64      // the loss rank 0 reported at each of them
	finalStep int64
	final     float64 // the loss of rank 0's "final" line
}

// ddpRuns parses a job's logs into what its program printed, by attempt.
func ddpRuns(lines []events.LogRecord) map[int]*ddpRun {
	runs := map[int]*ddpRun{}
	for _, r := range lines {
		rr := runs[r.Attempt]
		if rr == nil {
			rr = &ddpRun{allReduce: map[int]string{}, params: map[int]string{}}
			runs[r.Attempt] = rr
		}
		if m := allReduceLine.FindStringSubmatch(r.Line); m != nil {
			rank, _ := strconv.Atoi(m[1])
			rr.allReduce[rank] = fmt.Sprintf("world=%s sum=%s expected=%s backend=%s", m[2], m[3], m[4], m[5])
		}
		if m := paramsLine.FindStringSubmatch(r.Line); m != nil {
			rank, _ := strconv.Atoi(m[1])
			rr.params[rank] = m[2]
		}
		if m := resumedLine.FindStringSubmatch(r.Line); m != nil && r.Role == "master" {
			rr.resumed = m[1] + " " + m[2]
		}
		if m := finalLine.FindStringSubmatch(r.Line); m != nil {
			rr.finalStep, _ = strconv.ParseInt(m[1], 10, 64)
			rr.final, _ = strconv.ParseFloat(m[2], 64)
		}
		if vals, ok := events.ParseMetricLine(r.Line); ok {
			rr.steps = append(rr.steps, int64(vals["step"]))
			rr.losses = append(rr.losses, vals["loss"])
		}
	}
	return runs
}

// collectivesRight reports, for a run of a gang of world ranks, what is wrong with its
// first all-reduce and its parameters at the end (every rank's must be the same).
func collectivesRight(rr *ddpRun, world int) []string {
	var wrong []string
	want := fmt.Sprintf("world=%d sum=%d expected=%d backend=gloo", world, world*(world+1)/2, world*(world+1)/2)
	for rank := range world {
		if rr.allReduce[rank] != want {
			wrong = append(wrong, fmt.Sprintf("rank %d: first all-reduce %q, want %q", rank, rr.allReduce[rank], want))
		}
	}
	if len(rr.params) != world {
		wrong = append(wrong, fmt.Sprintf("parameter digests of %d ranks, want %d", len(rr.params), world))
	}
	for rank, p := range rr.params {
		if p != rr.params[0] {
			wrong = append(wrong, fmt.Sprintf("rank %d's parameters differ from rank 0's", rank))
		}
	}
	return wrong
}
