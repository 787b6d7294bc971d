package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opendlc/opendlc/api"
	kubebackend "github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// The worker runs with the backend's default ports: the rendezvous port, and for Ray
// Ray's own default GCS port.
const (
	rdzvPort = kubebackend.DefaultRendezvousPort
	gcsPort  = 6379
)

// frameworkVars is every variable some framework plugin sets (docs/frameworks.md). A
// pod's framework environment is its variables among these, so a plugin that misses one
// of its own variables, or sets another framework's, fails the comparison.
var frameworkVars = []string{
	// pytorch, deepspeed, megatron
	"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NODE_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
	"PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE",
	"PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_ID",
	// deepspeed, mpi
	"DLC_HOSTFILE_CONTENT",
	// tensorflow
	"TF_CONFIG",
	// mpi
	"DLC_MPI_HOSTS", "DLC_MPI_NP", "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_default_hostfile",
	"OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_set_default_slots", "K_MPI_JOB_ROLE",
	"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
	// paddle (POD_IP_DUMMY is the pod's own address, a field reference with no value)
	"PADDLE_JOB_ID", "PADDLE_NNODES", "PADDLE_MASTER", "PADDLE_SERVER_NUM", "PADDLE_TRAINER_NUM",
	// xgboost (and MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK above)
	"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_NUM_WORKER", "DMLC_TASK_ID", "DMLC_ROLE",
	"WORKER_ADDRS", "WORKER_PORT",
	// ray
	"RAY_ADDRESS", "RAY_HEAD_IP", "DLC_RAY_PORT", "DLC_RAY_HEAD",
	// slurm
	"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_NNODES",
	"SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE",
	"SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_GPUS_ON_NODE", "SLURM_SUBMIT_DIR",
	// preprocess, inference
	"DLC_SHARD_INDEX", "DLC_SHARD_COUNT",
	// custom
	"DLC_HOSTS", "DLC_WORLD_SIZE", "DLC_RANK",
}

// fwJob is one job of the framework tests: job name in workspace (and namespace) ns.
type fwJob struct{ name, ns string }

// host is the DNS name of replica role-i: <role>-<i>.<service>.<namespace>.svc.
func (j fwJob) host(role string, i int) string {
	return fmt.Sprintf("%s-%d.%s-a0.%s.svc", role, i, j.name, j.ns)
}

// gang is the ID of the job's first attempt, <workspace>.<job>.a0.
func (j fwJob) gang() string { return j.ns + "." + j.name + ".a0" }

// pod is the pod of replica "role-i": <job>-<role>-<i>-a0.
func (j fwJob) pod(replica string) string { return j.name + "-" + replica + "-a0" }

// ruleStep is one step of a success-rule scenario: the test makes the pods of some
// replicas (keyed "role-index") succeed or fail. Without phase the job must still be
// Running once the job reports those replicas finished, with every other replica still
// running and not being stopped. With phase the job must end in it, with reason; then
// every replica the test finished has that outcome and every other one was stopped by
// the job.
//
// A rule that decides too early shows Running while the job stops its gang, and only
// then the terminal phase, so the Running check alone may miss it; the last step
// catches it: a wrong reason, or a replica the test finished later found Stopped (or its
// pod gone when the test tries to finish it).
type ruleStep struct {
	complete []string
	fail     map[string]int32
	phase    schemas.JobPhase
	reason   string
}

// Each framework gets, on a real cluster, exactly the pods of its replicas, one headless
// Service, and its rendezvous environment with the replicas' DNS names; then the job ends
// by that framework's success rule, the test deciding which pods finish and when: kwok
// completes a pod only once the test annotates it kwok.opendlc.io/complete-after.
func TestFrameworksOnKubernetes(t *testing.T) {
	type fwCase struct {
		framework string
		roles     string // YAML of spec.roles
		extra     string // further lines of spec, indented two spaces
		env       func(j fwJob) map[string]map[string]string
		morePorts []string // Service ports besides the rendezvous port: name/port
		steps     []ruleStep
	}
	// sharded is a case of three independent shards: those in first complete, then
	// last completes (exit 0: the job succeeds) or fails with exit code exit (the job
	// fails, even though the others succeeded).
	sharded := func(framework string, first []string, last string, exit int32) fwCase {
		end := ruleStep{complete: []string{last}, phase: schemas.JobSucceeded, reason: "AllReplicasSucceeded"}
		if exit != 0 {
			end = ruleStep{fail: map[string]int32{last: exit}, phase: schemas.JobFailed, reason: "ReplicaFailed"}
		}
		return fwCase{framework: framework, roles: `{worker: {replicas: 3}}`, env: shardEnv,
			steps: []ruleStep{{complete: first}, end}}
	}
	tests := map[string]fwCase{
		// PyTorch: the master is rank 0, the workers follow by index; every replica
		// must succeed.
		"pytorch": {
			framework: "pytorch",
			roles:     `{master: {replicas: 1}, worker: {replicas: 3, resources: {gpu: 2}}}`,
			env: func(j fwJob) map[string]map[string]string {
				m := j.host("master", 0)
				return map[string]map[string]string{
					"master-0": torchVars(m, 4, 0, 1),
					"worker-0": torchVars(m, 4, 1, 2),
					"worker-1": torchVars(m, 4, 2, 2),
					"worker-2": torchVars(m, 4, 3, 2),
				}
			},
			steps: []ruleStep{
				{complete: []string{"master-0", "worker-0", "worker-1"}},
				{complete: []string{"worker-2"}, phase: schemas.JobSucceeded, reason: "AllReplicasSucceeded"},
			},
		},
		// DeepSpeed: torch's environment plus the hostfile of the ssh launcher, every
		// replica in rank order with its GPUs (or 1) as slots.
		"deepspeed": {
			framework: "deepspeed",
			roles:     `{master: {replicas: 1}, worker: {replicas: 2, resources: {gpu: 2}}}`,
			env: func(j fwJob) map[string]map[string]string {
				m := j.host("master", 0)
				hostfile := m + " slots=1\n" + j.host("worker", 0) + " slots=2\n" + j.host("worker", 1) + " slots=2\n"
				return map[string]map[string]string{
					"master-0": with(torchVars(m, 3, 0, 1), "DLC_HOSTFILE_CONTENT", hostfile),
					"worker-0": with(torchVars(m, 3, 1, 2), "DLC_HOSTFILE_CONTENT", hostfile),
					"worker-1": with(torchVars(m, 3, 2, 2), "DLC_HOSTFILE_CONTENT", hostfile),
				}
			},
			steps: []ruleStep{
				{complete: []string{"master-0", "worker-1"}},
				{complete: []string{"worker-0"}, phase: schemas.JobSucceeded, reason: "AllReplicasSucceeded"},
			},
		},
		// Megatron, elastic and without a master: worker 0 leads and serves torchrun's
		// c10d rendezvous.
		"megatron": {
			framework: "megatron",
			roles:     `{worker: {replicas: 2, resources: {gpu: 1}}}`,
			extra:     "  elastic: {minReplicas: 1, maxReplicas: 2}\n",
			env: func(j fwJob) map[string]map[string]string {
				w := j.host("worker", 0)
				elastic := func(m map[string]string) map[string]string {
					m["PET_NNODES"] = "1:2"
					m["PET_RDZV_BACKEND"] = "c10d"
					m["PET_RDZV_ENDPOINT"] = w + ":" + strconv.Itoa(rdzvPort)
					m["PET_RDZV_ID"] = j.gang()
					return m
				}
				return map[string]map[string]string{
					"worker-0": elastic(torchVars(w, 2, 0, 1)),
					"worker-1": elastic(torchVars(w, 2, 1, 1)),
				}
			},
			steps: []ruleStep{
				{complete: []string{"worker-1"}},
				{complete: []string{"worker-0"}, phase: schemas.JobSucceeded, reason: "AllReplicasSucceeded"},
			},
		},
		// TensorFlow: TF_CONFIG's cluster has every role, the evaluator too. The chief
		// decides: worker 0 succeeding (which would decide without a chief) changes
		// nothing; the chief succeeding succeeds the job while the parameter server,
		// worker 1 and the evaluator still run, and they are stopped.
		"tensorflow": {
			framework: "tensorflow",
			roles:     `{chief: {replicas: 1}, ps: {replicas: 1}, worker: {replicas: 2}, evaluator: {replicas: 1}}`,
			env: func(j fwJob) map[string]map[string]string {
				addr := func(role string, i int) string { return j.host(role, i) + ":" + strconv.Itoa(rdzvPort) }
				cluster := map[string][]string{
					"chief":     {addr("chief", 0)},
					"evaluator": {addr("evaluator", 0)},
					"ps":        {addr("ps", 0)},
					"worker":    {addr("worker", 0), addr("worker", 1)},
				}
				tf := func(role string, i int) map[string]string {
					b, _ := json.Marshal(map[string]any{"cluster": cluster, "task": map[string]any{"type": role, "index": i}, "environment": "cloud"})
					return map[string]string{"TF_CONFIG": string(b)}
				}
				return map[string]map[string]string{
					"chief-0":     tf("chief", 0),
					"ps-0":        tf("ps", 0),
					"worker-0":    tf("worker", 0),
					"worker-1":    tf("worker", 1),
					"evaluator-0": tf("evaluator", 0),
				}
			},
			steps: []ruleStep{
				{complete: []string{"worker-0"}},
				{complete: []string{"chief-0"}, phase: schemas.JobSucceeded, reason: "LeaderSucceeded"},
			},
		},
		// MPI: every replica gets the workers' hostfile (the launcher is not in it),
		// the launcher decides: a worker finishing changes nothing.
		"mpi": {
			framework: "mpi",
			roles:     `{launcher: {replicas: 1}, worker: {replicas: 2, resources: {gpu: 2}}}`,
			env: func(j fwJob) map[string]map[string]string {
				w0, w1 := j.host("worker", 0), j.host("worker", 1)
				mpi := func(role string) map[string]string {
					m := map[string]string{
						"DLC_HOSTFILE_CONTENT":              w0 + " slots=2\n" + w1 + " slots=2\n",
						"DLC_MPI_HOSTS":                     w0 + ":2," + w1 + ":2",
						"DLC_MPI_NP":                        "4",
						"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
						"OMPI_MCA_orte_default_hostfile":    "/etc/mpi/hostfile",
						"OMPI_MCA_plm_rsh_args":             "-o ConnectionAttempts=10",
						"OMPI_MCA_orte_set_default_slots":   "2",
						"K_MPI_JOB_ROLE":                    role,
					}
					if role == "launcher" {
						m["NVIDIA_VISIBLE_DEVICES"], m["NVIDIA_DRIVER_CAPABILITIES"] = "", ""
					}
					return m
				}
				return map[string]map[string]string{"launcher-0": mpi("launcher"), "worker-0": mpi("worker"), "worker-1": mpi("worker")}
			},
			steps: []ruleStep{
				{complete: []string{"worker-0"}},
				{complete: []string{"launcher-0"}, phase: schemas.JobSucceeded, reason: "LeaderSucceeded"},
			},
		},
		// XGBoost: the master runs the tracker and is task 0; every replica must
		// succeed.
		"xgboost": {
			framework: "xgboost",
			roles:     `{master: {replicas: 1}, worker: {replicas: 2}}`,
			env: func(j fwJob) map[string]map[string]string {
				dmlc := func(task int) map[string]string {
					m, port := j.host("master", 0), strconv.Itoa(rdzvPort)
					return map[string]string{
						"DMLC_TRACKER_URI": m, "DMLC_TRACKER_PORT": port,
						"DMLC_NUM_WORKER": "3", "DMLC_TASK_ID": strconv.Itoa(task), "DMLC_ROLE": "worker",
						"MASTER_ADDR": m, "MASTER_PORT": port, "WORLD_SIZE": "3", "RANK": strconv.Itoa(task),
						"WORKER_ADDRS": j.host("worker", 0) + "," + j.host("worker", 1), "WORKER_PORT": port,
					}
				}
				return map[string]map[string]string{"master-0": dmlc(0), "worker-0": dmlc(1), "worker-1": dmlc(2)}
			},
			steps: []ruleStep{
				{complete: []string{"master-0", "worker-0"}},
				{complete: []string{"worker-1"}, phase: schemas.JobSucceeded, reason: "AllReplicasSucceeded"},
			},
		},
		// PaddlePaddle in PaddleJob's parameter-server mode: master 0 serves the
		// rendezvous on its own address (POD_IP_DUMMY, which the kubelet expands) at
		// PaddleJob's port, the others find it by its DNS name; the masters decide.
		"paddle": {
			framework: "paddle",
			roles:     `{master: {replicas: 1}, worker: {replicas: 2}}`,
			morePorts: []string{"master/36543"},
			env: func(j fwJob) map[string]map[string]string {
				paddle := func(master string, extra ...string) map[string]string {
					m := map[string]string{"PADDLE_JOB_ID": j.name, "PADDLE_NNODES": "3", "PADDLE_MASTER": master}
					m[extra[0]] = extra[1]
					return m
				}
				found := j.host("master", 0) + ":36543"
				return map[string]map[string]string{
					"master-0": paddle("$(POD_IP_DUMMY):36543", "PADDLE_SERVER_NUM", "1"),
					"worker-0": paddle(found, "PADDLE_TRAINER_NUM", "1"),
					"worker-1": paddle(found, "PADDLE_TRAINER_NUM", "1"),
				}
			},
			steps: []ruleStep{
				{complete: []string{"worker-0"}},
				{complete: []string{"master-0"}, phase: schemas.JobSucceeded, reason: "LeaderSucceeded"},
			},
		},
		// Ray: RAY_ADDRESS is the head's GCS port, published by the Service. The head
		// decides both ways: a worker failing leaves the job Running, the head
		// succeeding succeeds it and the other worker is stopped.
		"ray": {
			framework: "ray",
			roles:     `{head: {replicas: 1}, worker: {replicas: 2}}`,
			morePorts: []string{"ray-gcs/" + strconv.Itoa(gcsPort)},
			env: func(j fwJob) map[string]map[string]string {
				ray := func(head bool, rank int) map[string]string {
					h := j.host("head", 0)
					return map[string]string{
						"RAY_ADDRESS": h + ":" + strconv.Itoa(gcsPort), "RAY_HEAD_IP": h,
						"DLC_RAY_PORT": strconv.Itoa(gcsPort), "DLC_RAY_HEAD": strconv.FormatBool(head),
						"MASTER_ADDR": h, "MASTER_PORT": strconv.Itoa(gcsPort), "WORLD_SIZE": "3", "RANK": strconv.Itoa(rank),
					}
				}
				return map[string]map[string]string{"head-0": ray(true, 0), "worker-0": ray(false, 1), "worker-1": ray(false, 2)}
			},
			steps: []ruleStep{
				{fail: map[string]int32{"worker-1": 3}},
				{complete: []string{"head-0"}, phase: schemas.JobSucceeded, reason: "LeaderSucceeded"},
			},
		},
		// Slurm: the workers are the nodes, a task per GPU; the launcher plays the batch
		// step on node 0 and decides.
		"slurm": {
			framework: "slurm",
			roles:     `{launcher: {replicas: 1}, worker: {replicas: 2, resources: {gpu: 2}}}`,
			extra:     "  workingDir: /work/run\n",
			env: func(j fwJob) map[string]map[string]string {
				nodes := j.host("worker", 0) + "," + j.host("worker", 1)
				// A number: 1 + FNV-1a of the gang's id modulo Slurm's largest job id.
				h := fnv.New32a()
				h.Write([]byte(j.gang()))
				id := strconv.Itoa(int(h.Sum32()%0x03FFFFFF) + 1)
				slurm := func(node, proc int, gpus string) map[string]string {
					m := map[string]string{
						"SLURM_JOB_ID": id, "SLURM_JOBID": id, "SLURM_JOB_NAME": j.name,
						"SLURM_JOB_NODELIST": nodes, "SLURM_NODELIST": nodes,
						"SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "4", "SLURM_NPROCS": "4",
						"SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS_PER_NODE": "2", "SLURM_NODEID": strconv.Itoa(node),
						"SLURM_PROCID": strconv.Itoa(proc), "SLURM_LOCALID": "0", "SLURM_SUBMIT_DIR": "/work/run",
						"MASTER_ADDR": j.host("worker", 0), "MASTER_PORT": strconv.Itoa(rdzvPort),
					}
					if gpus != "" {
						m["SLURM_GPUS_ON_NODE"] = gpus
					}
					return m
				}
				return map[string]map[string]string{"launcher-0": slurm(0, 0, ""), "worker-0": slurm(0, 0, "2"), "worker-1": slurm(1, 2, "2")}
			},
			steps: []ruleStep{
				{complete: []string{"worker-1"}},
				{complete: []string{"launcher-0"}, phase: schemas.JobSucceeded, reason: "LeaderSucceeded"},
			},
		},
		// Preprocess and inference: independent shards; the job succeeds only when
		// every shard has, and one failed shard fails it even after the others
		// succeeded.
		"preprocess":              sharded("preprocess", []string{"worker-0", "worker-1"}, "worker-2", 0),
		"preprocess-failed-shard": sharded("preprocess", []string{"worker-0", "worker-1"}, "worker-2", 7),
		"inference":               sharded("inference", []string{"worker-0", "worker-2"}, "worker-1", 0),
		"inference-failed-shard":  sharded("inference", []string{"worker-1", "worker-2"}, "worker-0", 9),
		// Custom: any roles; without a master, worker 0 leads the rank order, then the
		// other roles by name. Every replica must succeed.
		"custom": {
			framework: "custom",
			roles:     `{worker: {replicas: 2}, aux: {replicas: 1}}`,
			env: func(j fwJob) map[string]map[string]string {
				hosts := "worker-0=" + j.host("worker", 0) + ",worker-1=" + j.host("worker", 1) + ",aux-0=" + j.host("aux", 0)
				custom := func(rank int) map[string]string {
					return map[string]string{"DLC_HOSTS": hosts, "DLC_WORLD_SIZE": "3", "DLC_RANK": strconv.Itoa(rank)}
				}
				return map[string]map[string]string{"worker-0": custom(0), "worker-1": custom(1), "aux-0": custom(2)}
			},
			steps: []ruleStep{
				{complete: []string{"worker-0", "aux-0"}},
				{complete: []string{"worker-1"}, phase: schemas.JobSucceeded, reason: "AllReplicasSucceeded"},
			},
		},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.framework] = true
	}
	for _, f := range schemas.Frameworks {
		if !covered[string(f)] {
			t.Errorf("framework %s has no case", f)
		}
	}

	// The subtests run in parallel, each in its own workspace (namespace).
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			j := fwJob{name: name, ns: "fw-" + name}
			submit(t, ctx, itest.JobDoc(j.name, j.ns, fmt.Sprintf(`
  framework: %s
  image: registry.local/train:1.4
  command: [run]
  logs: {forward: false}
  roles: %s
%s`, tc.framework, tc.roles, tc.extra)))
			running := waitJob(t, ctx, j.ns, j.name, "Running", func(job *api.Job) bool {
				return job.Status.Phase == schemas.JobRunning || job.Status.Phase.Terminal()
			})
			if running.Status.Phase != schemas.JobRunning {
				t.Fatalf("phase %s (%s), want Running", running.Status.Phase, running.Status.Message)
			}
			want := tc.env(j)
			checkGangObjects(t, ctx, j, want, append([]string{"rendezvous/" + strconv.Itoa(rdzvPort)}, tc.morePorts...))
			runRule(t, ctx, j, slices.Sorted(maps.Keys(want)), tc.steps)
		})
	}
}

// torchVars is torch.distributed's environment of one replica: world replicas, this one
// of rank rank with perNode processes (its GPUs, or 1), rank 0 at addr.
func torchVars(addr string, world, rank, perNode int) map[string]string {
	port, w, r, n := strconv.Itoa(rdzvPort), strconv.Itoa(world), strconv.Itoa(rank), strconv.Itoa(perNode)
	return map[string]string{
		"MASTER_ADDR": addr, "MASTER_PORT": port, "WORLD_SIZE": w, "RANK": r, "NODE_RANK": r,
		"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": n,
		"PET_MASTER_ADDR": addr, "PET_MASTER_PORT": port, "PET_NNODES": w, "PET_NODE_RANK": r,
		"PET_NPROC_PER_NODE": n,
	}
}

// with returns m with k set to v.
func with(m map[string]string, k, v string) map[string]string {
	m[k] = v
	return m
}

// shardEnv is the environment of a 3-shard preprocess or inference job.
func shardEnv(fwJob) map[string]map[string]string {
	out := map[string]map[string]string{}
	for i := range 3 {
		out["worker-"+strconv.Itoa(i)] = map[string]string{"DLC_SHARD_INDEX": strconv.Itoa(i), "DLC_SHARD_COUNT": "3"}
	}
	return out
}

// frameworkEnv is the pod's variables among frameworkVars, TF_CONFIG's JSON normalised
// (its key order is no part of the contract).
func frameworkEnv(p corev1.Pod) map[string]string {
	all := envOf(p.Spec.Containers[0])
	out := map[string]string{}
	for _, k := range frameworkVars {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	normaliseEnv(out)
	return out
}

func normaliseEnv(m map[string]string) {
	if s, ok := m["TF_CONFIG"]; ok {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err == nil {
			b, _ := json.Marshal(v)
			m["TF_CONFIG"] = string(b)
		}
	}
}

// checkGangObjects checks the job's pods and Services while every replica runs: exactly
// one pod per replica of want (keyed "role-index"), named <job>-<role>-<index>-a0, with
// hostname and subdomain under exactly one headless Service <job>-a0 that selects them
// and publishes ports (name/port), and with exactly want's framework environment.
func checkGangObjects(t *testing.T, ctx context.Context, j fwJob, want map[string]map[string]string, ports []string) {
	t.Helper()
	svcs, err := env.cluster.Client.CoreV1().Services(j.ns).List(ctx, metav1.ListOptions{LabelSelector: "opendlc.io/job=" + j.name})
	if err != nil {
		t.Fatal(err)
	}
	var svcNames []string
	for _, s := range svcs.Items {
		svcNames = append(svcNames, s.Name)
	}
	if diff := cmp.Diff([]string{j.name + "-a0"}, svcNames); diff != "" {
		t.Fatalf("services (-want +got):\n%s", diff)
	}
	svc := svcs.Items[0]
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service %s: clusterIP %q publishNotReadyAddresses %v, want None and true", svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	wantSelector := map[string]string{"opendlc.io/managed-by": "opendlc", "opendlc.io/gang": j.gang()}
	if diff := cmp.Diff(wantSelector, svc.Spec.Selector); diff != "" {
		t.Errorf("service %s selector (-want +got):\n%s", svc.Name, diff)
	}
	var svcPorts []string
	for _, p := range svc.Spec.Ports {
		svcPorts = append(svcPorts, fmt.Sprintf("%s/%d", p.Name, p.Port))
		if p.Protocol != corev1.ProtocolTCP || p.TargetPort.IntValue() != int(p.Port) {
			t.Errorf("service %s port %s: protocol %s target %s", svc.Name, p.Name, p.Protocol, p.TargetPort.String())
		}
	}
	if diff := cmp.Diff(ports, svcPorts); diff != "" {
		t.Errorf("service %s ports (-want +got):\n%s", svc.Name, diff)
	}

	pods := jobPods(t, ctx, j.ns, j.name)
	var wantNames, gotNames []string
	for r := range want {
		wantNames = append(wantNames, j.pod(r))
	}
	got := map[string]map[string]string{}
	for _, p := range pods {
		gotNames = append(gotNames, p.Name)
		replica := p.Labels["opendlc.io/role"] + "-" + p.Labels["opendlc.io/replica-index"]
		got[replica] = frameworkEnv(p)
		if p.Name != j.pod(replica) {
			t.Errorf("pod %s is labelled replica %s", p.Name, replica)
		}
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is %s while the job is Running", p.Name, p.Status.Phase)
		}
		if p.Spec.Hostname != replica || p.Spec.Subdomain != svc.Name {
			t.Errorf("pod %s hostname %q subdomain %q, want %q and %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain, replica, svc.Name)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(p.Labels)) {
			t.Errorf("service %s does not select pod %s (labels %v)", svc.Name, p.Name, p.Labels)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != svc.UID {
			t.Errorf("pod %s owners %+v, want the service", p.Name, p.OwnerReferences)
		}
		var podPorts []string
		for _, cp := range p.Spec.Containers[0].Ports {
			podPorts = append(podPorts, fmt.Sprintf("%s/%d", cp.Name, cp.ContainerPort))
		}
		if diff := cmp.Diff(ports, podPorts); diff != "" {
			t.Errorf("pod %s container ports (-want +got):\n%s", p.Name, diff)
		}
	}
	slices.Sort(wantNames)
	slices.Sort(gotNames)
	if diff := cmp.Diff(wantNames, gotNames); diff != "" {
		t.Errorf("pod names (-want +got):\n%s", diff)
	}
	for _, e := range want {
		normaliseEnv(e)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("framework environment by replica (-want +got):\n%s", diff)
	}
}

// runRule plays the steps of a success-rule scenario (see ruleStep) on the job's
// replicas (keyed "role-index"), then checks that the job's objects are cleaned up.
func runRule(t *testing.T, ctx context.Context, j fwJob, replicas []string, steps []ruleStep) {
	t.Helper()
	finished := map[string]schemas.ReplicaPhase{} // by the test
	var exitCode *int32
	for i, st := range steps {
		for _, r := range st.complete {
			completePod(t, ctx, j.ns, j.pod(r))
			finished[r] = schemas.ReplicaSucceeded
		}
		for r, code := range st.fail {
			if err := env.cluster.FailPod(ctx, j.ns, j.pod(r), code); err != nil {
				t.Fatal(err)
			}
			finished[r] = schemas.ReplicaFailed
			exitCode = &code
		}
		what := fmt.Sprintf("step %d: %v reported", i, finished)
		if st.phase == "" {
			job := waitJob(t, ctx, j.ns, j.name, what, func(job *api.Job) bool {
				return job.Status.Phase.Terminal() || replicasFinished(job, finished)
			})
			if job.Status.Phase != schemas.JobRunning {
				t.Fatalf("step %d: phase %s (%s %s) with %v, want Running", i, job.Status.Phase, job.Status.Reason, job.Status.Message, finished)
			}
			for _, r := range job.Status.Replicas {
				if _, ok := finished[replicaKey(r)]; !ok && r.Phase != schemas.ReplicaRunning {
					t.Errorf("step %d: replica %s is %s, want Running", i, r.Name, r.Phase)
				}
			}
			svc, err := env.cluster.Client.CoreV1().Services(j.ns).Get(ctx, j.name+"-a0", metav1.GetOptions{})
			if err != nil || svc.Annotations["opendlc.io/stopped"] != "" {
				t.Fatalf("step %d: the gang is being stopped (service: %v)", i, err)
			}
			for _, p := range jobPods(t, ctx, j.ns, j.name) {
				if _, ok := finished[p.Labels["opendlc.io/role"]+"-"+p.Labels["opendlc.io/replica-index"]]; !ok && p.DeletionTimestamp != nil {
					t.Errorf("step %d: pod %s is being deleted", i, p.Name)
				}
			}
			continue
		}
		job := waitJob(t, ctx, j.ns, j.name, "terminal", terminal)
		if job.Status.Phase != st.phase || job.Status.Reason != st.reason {
			t.Fatalf("step %d: phase %s reason %s (%s), want %s %s", i, job.Status.Phase, job.Status.Reason, job.Status.Message, st.phase, st.reason)
		}
		if diff := cmp.Diff([]string{"Pending", "Launching", "Running", string(st.phase)}, timeline(job.Status)); diff != "" {
			t.Errorf("timeline (-want +got):\n%s", diff)
		}
		if st.phase == schemas.JobFailed {
			var failedPod string
			for r := range st.fail {
				failedPod = j.pod(r)
			}
			if job.Status.ExitCode == nil || exitCode == nil || *job.Status.ExitCode != *exitCode ||
				!strings.Contains(job.Status.Message, fmt.Sprintf("replica %s failed with exit code %d", failedPod, *exitCode)) {
				t.Errorf("failed job: exit code %v message %q, want replica %s's exit code %v", job.Status.ExitCode, job.Status.Message, failedPod, exitCode)
			}
		}
		// Every replica the test finished kept its outcome; the job stopped the rest.
		want, got := map[string]schemas.ReplicaPhase{}, map[string]schemas.ReplicaPhase{}
		for _, r := range replicas {
			want[r] = schemas.ReplicaStopped
			if p, ok := finished[r]; ok {
				want[r] = p
			}
		}
		for _, r := range job.Status.Replicas {
			got[replicaKey(r)] = r.Phase
			if r.Phase == schemas.ReplicaSucceeded && (r.ExitCode == nil || *r.ExitCode != 0) {
				t.Errorf("replica %s succeeded with exit code %v", r.Name, r.ExitCode)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("final replica phases (-want +got):\n%s", diff)
		}
		if i != len(steps)-1 {
			t.Fatalf("step %d ended the job; steps after it cannot run", i)
		}
	}
	testutil.Eventually(t, itest.Left(ctx), "the job's pods and service deleted", func() bool {
		_, err := env.cluster.Client.CoreV1().Services(j.ns).Get(ctx, j.name+"-a0", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(jobPods(t, ctx, j.ns, j.name)) == 0
	}, itest.PollInterval)
}

// replicasFinished reports whether the job reports each replica of want (keyed
// "role-index") in its phase.
func replicasFinished(job *api.Job, want map[string]schemas.ReplicaPhase) bool {
	n := 0
	for _, r := range job.Status.Replicas {
		if p, ok := want[replicaKey(r)]; ok {
			if r.Phase != p {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

func replicaKey(r schemas.ReplicaStatus) string { return r.Role + "-" + strconv.Itoa(r.Index) }

// completePod makes kwok complete a running pod now: every container exits 0.
func completePod(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{kubestack.AnnotationCompleteAfter: "0s"},
	}})
	if _, err := env.cluster.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("complete pod %s/%s: %v", ns, name, err)
	}
}
