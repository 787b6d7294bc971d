package frameworks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// sharedEndpoints puts every replica on one address, as the local backend does.
type sharedEndpoints struct{ fakeEndpoints }

func (sharedEndpoints) Host(string, int) string { return "127.0.0.1" }

func TestTensorFlowEnv(t *testing.T) {
	full := gang(schemas.FrameworkTensorFlow).role("worker", 2, 1).role("ps", 2, 0).
		role("evaluator", 1, 0).role("chief", 1, 1).obj()
	workers := gang(schemas.FrameworkTensorFlow).role("worker", 3, 0).obj()
	master := gang(schemas.FrameworkTensorFlow).role("worker", 1, 0).role("master", 1, 0).obj()
	both := gang(schemas.FrameworkTensorFlow).role("chief", 1, 0).role("master", 1, 0).obj()
	// The evaluator is in the cluster, as current Kubeflow TFJobs have it.
	const fullCluster = `"cluster":{"chief":["chief-0.gang:29500"],"evaluator":["evaluator-0.gang:29500"],` +
		`"ps":["ps-0.gang:29500","ps-1.gang:29500"],"worker":["worker-0.gang:29500","worker-1.gang:29500"]}`
	task := func(typ string, i int) string {
		return `"task":{"type":"` + typ + `","index":` + itoa(i) + `},"environment":"cloud"}`
	}

	tests := map[string]struct {
		gang    backend.GangSpec
		replica backend.ReplicaSpec
		ep      Endpoints
		want    string
	}{
		"chief":                                {gang: full, replica: replica(full, "chief", 0), ep: ports, want: `{` + fullCluster + `,` + task("chief", 0)},
		"ps 1":                                 {gang: full, replica: replica(full, "ps", 1), ep: ports, want: `{` + fullCluster + `,` + task("ps", 1)},
		"worker 1":                             {gang: full, replica: replica(full, "worker", 1), ep: ports, want: `{` + fullCluster + `,` + task("worker", 1)},
		"evaluator is in the cluster":          {gang: full, replica: replica(full, "evaluator", 0), ep: ports, want: `{` + fullCluster + `,` + task("evaluator", 0)},
		"workers only":                         {gang: workers, replica: replica(workers, "worker", 2), ep: ports, want: `{"cluster":{"worker":["worker-0.gang:29500","worker-1.gang:29500","worker-2.gang:29500"]},` + task("worker", 2)},
		"master is the chief":                  {gang: master, replica: replica(master, "master", 0), ep: ports, want: `{"cluster":{"chief":["master-0.gang:29500"],"worker":["worker-0.gang:29500"]},` + task("chief", 0)},
		"a worker sees the master as chief":    {gang: master, replica: replica(master, "worker", 0), ep: ports, want: `{"cluster":{"chief":["master-0.gang:29500"],"worker":["worker-0.gang:29500"]},` + task("worker", 0)},
		"master beside a chief keeps its name": {gang: both, replica: replica(both, "master", 0), ep: ports, want: `{"cluster":{"chief":["chief-0.gang:29500"],"master":["master-0.gang:29500"]},` + task("master", 0)},
		// Rank order: worker-0, worker-1, chief-0, evaluator-0, ps-0, ps-1.
		"one address: a port per replica in rank order": {
			gang: full, replica: replica(full, "ps", 0), ep: sharedEndpoints{ports},
			want: `{"cluster":{"chief":["127.0.0.1:29502"],"evaluator":["127.0.0.1:29503"],"ps":["127.0.0.1:29504","127.0.0.1:29505"],` +
				`"worker":["127.0.0.1:29500","127.0.0.1:29501"]},` + task("ps", 0),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := EnvFor(tc.gang, tc.replica, tc.ep)
			if err != nil {
				t.Fatalf("EnvFor: %v", err)
			}
			want := append([]schemas.EnvVar{{Name: "TF_CONFIG", Value: tc.want}}, common(tc.replica)...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("EnvFor mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
