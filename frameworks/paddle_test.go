package frameworks

import (
	"testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// podIPEndpoints are fakeEndpoints whose replicas learn their own IP only when they run,
// as on Kubernetes.
type podIPEndpoints struct{ fakeEndpoints }

func (podIPEndpoints) SelfIP() string { return PodIPRef }

// Each replica gets what Kubeflow's PaddleJob gives it (training-operator's
// paddlepaddle/envvar.go): PADDLE_JOB_ID (the job's name) and PADDLE_NNODES (every
// replica); PADDLE_MASTER, which on the rendezvous replica (master 0, else worker 0) is
// its own IP, POD_IP_DUMMY, and elsewhere that replica's host; and, with masters (the
// parameter-server mode), PADDLE_SERVER_NUM=1 on masters and PADDLE_TRAINER_NUM=1 on
// workers.
func TestPaddleEnv(t *testing.T) {
	collective := gang(schemas.FrameworkPaddle).role("worker", 3, 1).obj()
	ps := gang(schemas.FrameworkPaddle).role("worker", 2, 0).role("master", 2, 0).obj()
	const port = "36543"
	pe := fakeEndpoints{PortPaddleMaster: 36543}
	kube := podIPEndpoints{pe}
	local := localEndpoints{pe}
	env := func(nnodes, master string, rest ...schemas.EnvVar) []schemas.EnvVar {
		return append([]schemas.EnvVar{
			{Name: "PADDLE_JOB_ID", Value: "j"},
			{Name: "PADDLE_NNODES", Value: nnodes},
		}, append(rest, schemas.EnvVar{Name: "PADDLE_MASTER", Value: master})...)
	}
	leader := func(nnodes, ip string, rest ...schemas.EnvVar) []schemas.EnvVar {
		return append([]schemas.EnvVar{
			{Name: "PADDLE_JOB_ID", Value: "j"},
			{Name: "PADDLE_NNODES", Value: nnodes},
			{Name: "POD_IP_DUMMY", Value: ip},
			{Name: "PADDLE_MASTER", Value: ip + ":" + port},
		}, rest...)
	}
	server := schemas.EnvVar{Name: "PADDLE_SERVER_NUM", Value: "1"}
	trainer := schemas.EnvVar{Name: "PADDLE_TRAINER_NUM", Value: "1"}
	tests := map[string]struct {
		gang    backend.GangSpec
		replica backend.ReplicaSpec
		ep      Endpoints
		want    []schemas.EnvVar
	}{
		"collective: worker 0 serves on its own IP": {gang: collective, replica: replica(collective, "worker", 0), ep: kube,
			want: leader("3", "$(POD_IP_DUMMY)")},
		"collective: worker 2 finds worker 0": {gang: collective, replica: replica(collective, "worker", 2), ep: kube,
			want: env("3", "worker-0.gang:"+port)},
		"ps: master 0 serves on its own IP": {gang: ps, replica: replica(ps, "master", 0), ep: kube,
			want: leader("4", "$(POD_IP_DUMMY)", server)},
		"ps: master 1 is a server that finds master 0": {gang: ps, replica: replica(ps, "master", 1), ep: kube,
			want: append(env("4", "master-0.gang:"+port), server)},
		"ps: worker 0 is a trainer": {gang: ps, replica: replica(ps, "worker", 0), ep: kube,
			want: append(env("4", "master-0.gang:"+port), trainer)},
		"local: the leader's own address is its host": {gang: collective, replica: replica(collective, "worker", 0), ep: local,
			want: leader("3", "127.0.0.1")},
		"local: the others find it there": {gang: collective, replica: replica(collective, "worker", 1), ep: local,
			want: env("3", "127.0.0.1:"+port)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := EnvFor(tc.gang, tc.replica, tc.ep)
			if err != nil {
				t.Fatal(err)
			}
			want := append(tc.want, common(tc.replica)...)
			if len(got) != len(want) {
				t.Fatalf("EnvFor = %v, want %v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("EnvFor[%d] = %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
	if _, err := EnvFor(collective, collective.Replicas[0], fakeEndpoints{PortRendezvous: 29500}); err == nil {
		t.Error("EnvFor succeeded without the paddle port")
	}
	if DefaultPort(PortPaddleMaster) != 36543 {
		t.Errorf("DefaultPort(%q) = %d, want PaddleJob's 36543", PortPaddleMaster, DefaultPort(PortPaddleMaster))
	}
}

// As PaddleJob decides: with masters, the job succeeds when every master has (workers
// still running are stopped); without, when every worker has; any failure fails it.
func TestPaddleOutcome(t *testing.T) {
	type R = []schemas.ReplicaStatus
	for name, tc := range map[string]struct {
		reps R
		want outcome
	}{
		"collective: a worker left": {reps: R{st("worker", 0, ok, 1), st("worker", 1, run, 0)}},
		"collective: every worker":  {reps: R{st("worker", 0, ok, 1), st("worker", 1, ok, 2)}, want: outcome{schemas.JobSucceeded, "j-worker-1-a1"}},
		"ps: workers done, a master running": {
			reps: R{st("master", 0, ok, 1), st("master", 1, run, 0), st("worker", 0, ok, 1)},
		},
		"ps: the masters decide": {
			reps: R{st("master", 0, ok, 3), st("master", 1, ok, 2), st("worker", 0, run, 0)},
			want: outcome{schemas.JobSucceeded, "j-master-0-a1"},
		},
		"ps: a failed worker fails the job": {
			reps: R{st("master", 0, run, 0), st("worker", 0, fail, 1)},
			want: outcome{schemas.JobFailed, "j-worker-0-a1"},
		},
	} {
		phase, by := Outcome(schemas.FrameworkPaddle, tc.reps)
		if got := (outcome{phase, by}); got != tc.want {
			t.Errorf("%s: Outcome = %+v, want %+v", name, got, tc.want)
		}
	}
}
