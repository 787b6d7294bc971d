package kube

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// Each framework's pods carry its rendezvous environment, with the replicas' DNS names
// on the cluster, and the job succeeds when kwok completes the pods.
func TestFrameworkEnvironmentOnKubernetes(t *testing.T) {
	ctx := testContext(t)
	host := func(ns, job, role string, i int) string {
		return fmt.Sprintf("%s-%d.%s-a0.%s.svc", role, i, job, ns)
	}
	// The subtests run in parallel, each in its own namespace.
	for name, tc := range map[string]struct {
		framework string
		roles     string
		check     func(t *testing.T, ns string, env map[string]map[string]string)
	}{
		"tensorflow": {"tensorflow", `{chief: {replicas: 1}, ps: {replicas: 1}, worker: {replicas: 2}}`,
			func(t *testing.T, ns string, env map[string]map[string]string) {
				var c struct {
					Cluster map[string][]string `json:"cluster"`
					Task    struct {
						Type  string `json:"type"`
						Index int    `json:"index"`
					} `json:"task"`
				}
				if err := json.Unmarshal([]byte(env["worker-1"]["TF_CONFIG"]), &c); err != nil {
					t.Fatalf("TF_CONFIG of worker-1: %v", err)
				}
				if c.Task.Type != "worker" || c.Task.Index != 1 {
					t.Errorf("task %+v", c.Task)
				}
				for role, n := range map[string]int{"chief": 1, "ps": 1, "worker": 2} {
					for i := 0; i < n; i++ {
						if got := c.Cluster[role]; len(got) != n || !strings.HasPrefix(got[i], host(ns, "tensorflow", role, i)+":") {
							t.Errorf("cluster[%s] = %v", role, got)
						}
					}
				}
			}},
		"mpi": {"mpi", `{launcher: {replicas: 1}, worker: {replicas: 2, resources: {gpu: 8}}}`,
			func(t *testing.T, ns string, env map[string]map[string]string) {
				want := fmt.Sprintf("%s slots=8\n%s slots=8\n", host(ns, "mpi", "worker", 0), host(ns, "mpi", "worker", 1))
				if got := env["launcher-0"]["DLC_HOSTFILE_CONTENT"]; got != want {
					t.Errorf("hostfile %q, want %q", got, want)
				}
				if env["launcher-0"]["DLC_MPI_NP"] != "16" {
					t.Errorf("DLC_MPI_NP = %q, want 16", env["launcher-0"]["DLC_MPI_NP"])
				}
			}},
		"pytorch": {"pytorch", `{master: {replicas: 1}, worker: {replicas: 3, resources: {gpu: 2}}}`,
			func(t *testing.T, ns string, env map[string]map[string]string) {
				ranks := map[string]string{}
				for r, e := range env {
					ranks[r] = e["RANK"]
					if e["MASTER_ADDR"] != host(ns, "pytorch", "master", 0) || e["WORLD_SIZE"] != "4" {
						t.Errorf("%s: MASTER_ADDR %s WORLD_SIZE %s", r, e["MASTER_ADDR"], e["WORLD_SIZE"])
					}
				}
				if diff := cmp.Diff(map[string]string{"master-0": "0", "worker-0": "1", "worker-1": "2", "worker-2": "3"}, ranks); diff != "" {
					t.Errorf("torchrun rank layout (-want +got):\n%s", diff)
				}
				if env["worker-0"]["LOCAL_WORLD_SIZE"] != "2" {
					t.Errorf("LOCAL_WORLD_SIZE = %q, want 2 (GPUs per replica)", env["worker-0"]["LOCAL_WORLD_SIZE"])
				}
			}},
		"ray": {"ray", `{head: {replicas: 1}, worker: {replicas: 2}}`,
			func(t *testing.T, ns string, env map[string]map[string]string) {
				for r, e := range env {
					if !strings.HasPrefix(e["RAY_ADDRESS"], host(ns, "ray", "head", 0)+":") {
						t.Errorf("%s: RAY_ADDRESS %q", r, e["RAY_ADDRESS"])
					}
				}
				if env["head-0"]["DLC_RAY_HEAD"] != "true" || env["worker-0"]["DLC_RAY_HEAD"] != "false" {
					t.Errorf("DLC_RAY_HEAD head %q worker %q", env["head-0"]["DLC_RAY_HEAD"], env["worker-0"]["DLC_RAY_HEAD"])
				}
			}},
		"slurm": {"slurm", `{launcher: {replicas: 1}, worker: {replicas: 2}}`,
			func(t *testing.T, ns string, env map[string]map[string]string) {
				want := host(ns, "slurm", "worker", 0) + "," + host(ns, "slurm", "worker", 1)
				if got := env["launcher-0"]["SLURM_JOB_NODELIST"]; got != want {
					t.Errorf("SLURM_JOB_NODELIST %q, want %q", got, want)
				}
				if env["launcher-0"]["SLURM_NNODES"] != "2" || env["worker-1"]["SLURM_NODEID"] != "1" {
					t.Errorf("SLURM_NNODES %q, SLURM_NODEID of worker-1 %q", env["launcher-0"]["SLURM_NNODES"], env["worker-1"]["SLURM_NODEID"])
				}
			}},
		"inference": {"inference", `{worker: {replicas: 3}}`,
			func(t *testing.T, ns string, env map[string]map[string]string) {
				var shards []string
				for _, e := range env {
					shards = append(shards, e["DLC_SHARD_INDEX"]+"/"+e["DLC_SHARD_COUNT"])
				}
				sort.Strings(shards)
				if diff := cmp.Diff([]string{"0/3", "1/3", "2/3"}, shards); diff != "" {
					t.Errorf("shards (-want +got):\n%s", diff)
				}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := "fw-" + name
			submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata:
  name: %s
  workspace: %s
  annotations: {kwok.opendlc.io/complete-after: 2s}
spec:
  framework: %s
  image: registry.local/train:1.4
  command: [run]
  roles: %s
`, tc.framework, ns, tc.framework, tc.roles))
			waitJob(t, ctx, ns, tc.framework, "launched", func(j *api.Job) bool {
				return j.Status.Phase == schemas.JobRunning || j.Status.Phase.Terminal()
			})
			env := map[string]map[string]string{}
			for _, p := range jobPods(t, ctx, ns, tc.framework) {
				env[p.Labels["opendlc.io/role"]+"-"+p.Labels["opendlc.io/replica-index"]] = envOf(p.Spec.Containers[0])
			}
			tc.check(t, ns, env)
			if j := waitJob(t, ctx, ns, tc.framework, "terminal", terminal); j.Status.Phase != schemas.JobSucceeded {
				t.Errorf("phase %s: %s", j.Status.Phase, j.Status.Message)
			}
		})
	}
}
