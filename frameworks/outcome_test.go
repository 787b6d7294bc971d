package frameworks

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

// st is a replica status "role-index=phase", finished at minute fin (0: no finish time).
func st(role string, index int, phase schemas.ReplicaPhase, fin int) schemas.ReplicaStatus {
	r := schemas.ReplicaStatus{Name: fmt.Sprintf("j-%s-%d-a1", role, index), Role: role, Index: index, Phase: phase}
	if fin > 0 {
		t := time.Date(2025, 1, 1, 0, fin, 0, 0, time.UTC)
		r.FinishTime = &t
	}
	return r
}

const (
	run  = schemas.ReplicaRunning
	pend = schemas.ReplicaPending
	ok   = schemas.ReplicaSucceeded
	fail = schemas.ReplicaFailed
	stop = schemas.ReplicaStopped
)

type outcome struct {
	Phase     schemas.JobPhase
	DecidedBy string
}

func TestOutcome(t *testing.T) {
	type R = []schemas.ReplicaStatus
	undecided := outcome{}
	succeeded := func(by string) outcome { return outcome{schemas.JobSucceeded, by} }
	failed := func(by string) outcome { return outcome{schemas.JobFailed, by} }

	tests := map[string]struct {
		fw   schemas.Framework
		reps R
		want outcome
	}{
		// Every replica: pytorch and the frameworks that share its rule.
		"pytorch: no replicas yet":   {fw: schemas.FrameworkPyTorch, reps: nil, want: undecided},
		"pytorch: running":           {fw: schemas.FrameworkPyTorch, reps: R{st("master", 0, ok, 1), st("worker", 0, run, 0)}, want: undecided},
		"pytorch: all succeeded":     {fw: schemas.FrameworkPyTorch, reps: R{st("master", 0, ok, 3), st("worker", 0, ok, 5), st("worker", 1, ok, 4)}, want: succeeded("j-worker-0-a1")},
		"pytorch: one failed":        {fw: schemas.FrameworkPyTorch, reps: R{st("master", 0, run, 0), st("worker", 1, fail, 2)}, want: failed("j-worker-1-a1")},
		"pytorch: first failure":     {fw: schemas.FrameworkPyTorch, reps: R{st("worker", 0, fail, 5), st("worker", 1, fail, 2), st("master", 0, fail, 0)}, want: failed("j-worker-1-a1")},
		"pytorch: stopped is failed": {fw: schemas.FrameworkPyTorch, reps: R{st("worker", 0, ok, 1), st("worker", 1, stop, 2)}, want: failed("j-worker-1-a1")},
		"deepspeed: failed":          {fw: schemas.FrameworkDeepSpeed, reps: R{st("worker", 0, fail, 1), st("worker", 1, ok, 1)}, want: failed("j-worker-0-a1")},
		"megatron: all succeeded":    {fw: schemas.FrameworkMegatron, reps: R{st("worker", 0, ok, 1), st("worker", 1, ok, 1)}, want: succeeded("j-worker-1-a1")},
		"custom: running":            {fw: schemas.FrameworkCustom, reps: R{st("a", 0, ok, 1), st("b", 0, pend, 0)}, want: undecided},
		"xgboost: failed worker":     {fw: schemas.FrameworkXGBoost, reps: R{st("master", 0, run, 0), st("worker", 0, fail, 1)}, want: failed("j-worker-0-a1")},
		"xgboost: all succeeded":     {fw: schemas.FrameworkXGBoost, reps: R{st("master", 0, ok, 2), st("worker", 0, ok, 1)}, want: succeeded("j-master-0-a1")},
		"preprocess: one shard left": {fw: schemas.FrameworkPreprocess, reps: R{st("worker", 0, ok, 1), st("worker", 1, run, 0), st("worker", 2, ok, 2)}, want: undecided},
		"preprocess: every shard":    {fw: schemas.FrameworkPreprocess, reps: R{st("worker", 0, ok, 1), st("worker", 1, ok, 3), st("worker", 2, ok, 2)}, want: succeeded("j-worker-1-a1")},
		"inference: a shard failed":  {fw: schemas.FrameworkInference, reps: R{st("worker", 0, ok, 1), st("worker", 1, fail, 3)}, want: failed("j-worker-1-a1")},
		"unknown: every replica":     {fw: "jax", reps: R{st("worker", 0, ok, 1)}, want: succeeded("j-worker-0-a1")},

		// TensorFlow: the chief, else worker 0.
		"tf: chief succeeded, workers and ps run": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("chief", 0, ok, 1), st("worker", 0, run, 0), st("ps", 0, run, 0), st("evaluator", 0, run, 0)},
			want: succeeded("j-chief-0-a1"),
		},
		"tf: workers succeeded, chief runs": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("chief", 0, run, 0), st("worker", 0, ok, 1), st("worker", 1, ok, 1), st("ps", 0, run, 0)},
			want: undecided,
		},
		"tf: the master is the chief's alias and decides": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("master", 0, ok, 1), st("worker", 0, run, 0), st("ps", 0, run, 0)},
			want: succeeded("j-master-0-a1"),
		},
		"tf: workers succeeding do not decide beside a master": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("master", 0, run, 0), st("worker", 0, ok, 1)},
			want: undecided,
		},
		"tf: chief failed": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("chief", 0, fail, 2), st("worker", 0, run, 0), st("ps", 0, run, 0)},
			want: failed("j-chief-0-a1"),
		},
		"tf: a ps failed": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("chief", 0, run, 0), st("worker", 0, run, 0), st("ps", 1, fail, 2)},
			want: failed("j-ps-1-a1"),
		},
		"tf: without chief, worker 0 decides": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("worker", 0, ok, 2), st("worker", 1, run, 0), st("ps", 0, run, 0)},
			want: succeeded("j-worker-0-a1"),
		},
		"tf: without chief, worker 1 does not": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("worker", 0, run, 0), st("worker", 1, ok, 2), st("ps", 0, run, 0)},
			want: undecided,
		},
		"tf: without chief, worker 0 failed": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("worker", 0, fail, 2), st("worker", 1, run, 0)},
			want: failed("j-worker-0-a1"),
		},
		"tf: neither chief nor worker: the evaluator, not the ps": {
			fw:   schemas.FrameworkTensorFlow,
			reps: R{st("evaluator", 0, ok, 2), st("ps", 0, run, 0)},
			want: succeeded("j-evaluator-0-a1"),
		},

		// MPI and Slurm: the launcher.
		"mpi: launcher succeeded, workers still serve": {
			fw:   schemas.FrameworkMPI,
			reps: R{st("launcher", 0, ok, 3), st("worker", 0, run, 0), st("worker", 1, run, 0)},
			want: succeeded("j-launcher-0-a1"),
		},
		"mpi: workers done, launcher runs": {
			fw:   schemas.FrameworkMPI,
			reps: R{st("launcher", 0, run, 0), st("worker", 0, ok, 1)},
			want: undecided,
		},
		"mpi: launcher failed": {
			fw:   schemas.FrameworkMPI,
			reps: R{st("launcher", 0, fail, 3), st("worker", 0, run, 0)},
			want: failed("j-launcher-0-a1"),
		},
		"mpi: a worker failed first": {
			fw:   schemas.FrameworkMPI,
			reps: R{st("launcher", 0, fail, 3), st("worker", 1, fail, 2)},
			want: failed("j-worker-1-a1"),
		},
		"slurm: launcher succeeded": {
			fw:   schemas.FrameworkSlurm,
			reps: R{st("launcher", 0, ok, 3), st("worker", 0, ok, 2), st("worker", 1, run, 0)},
			want: succeeded("j-launcher-0-a1"),
		},
		"slurm: a worker failed": {
			fw:   schemas.FrameworkSlurm,
			reps: R{st("launcher", 0, run, 0), st("worker", 0, fail, 2)},
			want: failed("j-worker-0-a1"),
		},

		// Ray: the head, both ways.
		"ray: head succeeded": {
			fw:   schemas.FrameworkRay,
			reps: R{st("head", 0, ok, 3), st("worker", 0, run, 0)},
			want: succeeded("j-head-0-a1"),
		},
		"ray: a worker failed, head runs": {
			fw:   schemas.FrameworkRay,
			reps: R{st("head", 0, run, 0), st("worker", 0, fail, 1)},
			want: undecided,
		},
		"ray: head failed": {
			fw:   schemas.FrameworkRay,
			reps: R{st("head", 0, fail, 2), st("worker", 0, run, 0)},
			want: failed("j-head-0-a1"),
		},
		"ray: workers succeeded, head runs": {
			fw:   schemas.FrameworkRay,
			reps: R{st("head", 0, run, 0), st("worker", 0, ok, 1)},
			want: undecided,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got outcome
			got.Phase, got.DecidedBy = Outcome(tc.fw, tc.reps)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Outcome mismatch (-want +got):\n%s", diff)
			}
			// The snapshot's order does not matter.
			rev := make([]schemas.ReplicaStatus, len(tc.reps))
			for i, r := range tc.reps {
				rev[len(rev)-1-i] = r
			}
			var gotRev outcome
			gotRev.Phase, gotRev.DecidedBy = Outcome(tc.fw, rev)
			if diff := cmp.Diff(got, gotRev); diff != "" {
				t.Errorf("Outcome depends on replica order (-given +reversed):\n%s", diff)
			}
		})
	}
}

// A replica killed from outside is the cause, not its peer that exited with an error a
// moment earlier on the record (its connection reset at the kill); further apart, or
// when the first failure is itself external, the first failure stays the cause.
func TestFirstFailurePrefersAKilledReplica(t *testing.T) {
	at := func(role string, index int, class schemas.FailureClass, ms int) schemas.ReplicaStatus {
		r := st(role, index, fail, 0)
		fin := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
		r.FinishTime, r.Reason = &fin, class
		return r
	}
	for name, tc := range map[string]struct {
		reps []schemas.ReplicaStatus
		want string
	}{
		"peer's error recorded first, the kill 200 ms later": {
			reps: []schemas.ReplicaStatus{at("worker", 0, schemas.FailureError, 0), at("worker", 1, schemas.FailureSignal, 200)}, want: "j-worker-1-a1",
		},
		"the OOM kill 1.5 s later": {
			reps: []schemas.ReplicaStatus{at("worker", 0, schemas.FailureError, 0), at("worker", 1, schemas.FailureOOMKilled, 1500)}, want: "j-worker-1-a1",
		},
		"the kill 5 s later: a separate event": {
			reps: []schemas.ReplicaStatus{at("worker", 0, schemas.FailureError, 0), at("worker", 1, schemas.FailureSignal, 5000)}, want: "j-worker-0-a1",
		},
		"two errors: the first": {
			reps: []schemas.ReplicaStatus{at("worker", 1, schemas.FailureError, 100), at("worker", 0, schemas.FailureError, 300)}, want: "j-worker-1-a1",
		},
		"two kills: the first": {
			reps: []schemas.ReplicaStatus{at("worker", 0, schemas.FailureError, 0), at("worker", 2, schemas.FailureSignal, 400), at("worker", 1, schemas.FailureNodeLost, 300)}, want: "j-worker-1-a1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := firstFailure(tc.reps); got == nil || got.Name != tc.want {
				t.Errorf("firstFailure = %v, want %s", got, tc.want)
			}
			if phase, by := Outcome(schemas.FrameworkPyTorch, tc.reps); phase != schemas.JobFailed || by != tc.want {
				t.Errorf("Outcome = %s by %s, want Failed by %s", phase, by, tc.want)
			}
		})
	}
}
