package integration

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// TensorFlow on the local backend: every replica gets a TF_CONFIG describing the same
// cluster, and the chief decides: it succeeds while the parameter server and workers
// still run, the job succeeds, and the rest of the gang is stopped.
func TestTensorFlowChiefDecides(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	j := runJob(t, ctx, ws, "tf", `
  framework: tensorflow
  command: [sh, -c, 'echo "$TF_CONFIG"; exec sleep 600']
  roles:
    chief: {replicas: 1, command: [sh, -c, 'echo "$TF_CONFIG"; sleep 1']}
    ps: {replicas: 1}
    worker: {replicas: 2}
`)
	st := j.Status
	if st.Phase != schemas.JobSucceeded || st.Reason != "LeaderSucceeded" {
		t.Fatalf("status %s/%s %q, want Succeeded by the chief", st.Phase, st.Reason, st.Message)
	}
	phases := map[string]schemas.ReplicaPhase{}
	for _, r := range st.Replicas {
		phases[r.Role+"-"+strconv.Itoa(r.Index)] = r.Phase
	}
	want := map[string]schemas.ReplicaPhase{"chief-0": "Succeeded", "ps-0": "Stopped", "worker-0": "Stopped", "worker-1": "Stopped"}
	if diff := cmp.Diff(want, phases); diff != "" {
		t.Errorf("replica phases (-want +got):\n%s", diff)
	}
	type tfConfig struct {
		Cluster map[string][]string `json:"cluster"`
		Task    struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		} `json:"task"`
	}
	tasks := []string{}
	var cluster map[string][]string
	for _, r := range jobLogs(t, ctx, ws, "tf") {
		var c tfConfig
		if err := json.Unmarshal([]byte(r.Line), &c); err != nil {
			t.Fatalf("replica %s printed %q, not a TF_CONFIG: %v", r.Replica, r.Line, err)
		}
		if cluster == nil {
			cluster = c.Cluster
		} else if diff := cmp.Diff(cluster, c.Cluster); diff != "" {
			t.Errorf("replicas disagree on the cluster:\n%s", diff)
		}
		tasks = append(tasks, fmt.Sprintf("%s-%d", c.Task.Type, c.Task.Index))
	}
	sort.Strings(tasks)
	if diff := cmp.Diff([]string{"chief-0", "ps-0", "worker-0", "worker-1"}, tasks); diff != "" {
		t.Errorf("TF_CONFIG tasks (-want +got):\n%s", diff)
	}
	if len(cluster["chief"]) != 1 || len(cluster["ps"]) != 1 || len(cluster["worker"]) != 2 {
		t.Errorf("cluster = %v", cluster)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "tf"), "training_job_tf_chief_decides.json")
}

// A preprocessing job of independent shards succeeds only when every shard has: each
// shard sees its index and the count; one failing shard fails the job.
func TestShardsSucceedOnlyTogether(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	for name, fail := range map[string]string{"allgood": "9", "onebad": "1"} {
		submit(t, ctx, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: preprocess
  command: [sh, -c, 'echo "shard $DLC_SHARD_INDEX of $DLC_SHARD_COUNT"; [ "$DLC_SHARD_INDEX" != %s ] || exit 5']
  roles: {worker: {replicas: 3}}
`, fail)))
	}
	good := waitTerminal(t, ctx, ws, "allgood").Status
	if good.Phase != schemas.JobSucceeded {
		t.Errorf("allgood: %s %s", good.Phase, good.Message)
	}
	var lines []string
	for _, r := range jobLogs(t, ctx, ws, "allgood") {
		lines = append(lines, r.Line)
	}
	sort.Strings(lines)
	if diff := cmp.Diff([]string{"shard 0 of 3", "shard 1 of 3", "shard 2 of 3"}, lines); diff != "" {
		t.Errorf("shard lines (-want +got):\n%s", diff)
	}
	bad := waitTerminal(t, ctx, ws, "onebad").Status
	if bad.Phase != schemas.JobFailed || bad.ExitCode == nil || *bad.ExitCode != 5 || !strings.Contains(bad.Message, "worker-1") {
		t.Errorf("onebad: %s exit %v %q, want Failed by shard 1 with exit code 5", bad.Phase, bad.ExitCode, bad.Message)
	}
}

// xgboostCollective joins XGBoost's collective from the environment alone: rank 0
// (DMLC_TASK_ID 0) starts the tracker on DMLC_TRACKER_PORT for DMLC_NUM_WORKER
// workers, every replica initialises the communicator from the DMLC_* variables
// (xgboost reads them itself) and sums task+1 over the collective, then prints what it
// got and training-operator v1's variables.
const xgboostCollective = `import os
import numpy as np
from xgboost import collective, tracker
n = int(os.environ["DMLC_NUM_WORKER"])
task = int(os.environ["DMLC_TASK_ID"])
t = None
if task == 0:
    t = tracker.RabitTracker(host_ip=os.environ["DMLC_TRACKER_URI"], n_workers=n, port=int(os.environ["DMLC_TRACKER_PORT"]), sortby="task")
    t.start(n)
collective.init()
s = collective.allreduce(np.array([task + 1.0]), collective.Op.SUM)
e = os.environ
print("task %d rank %d of %d sum %g RANK=%s WORLD_SIZE=%s MASTER=%s:%s tracker=%s unbuffered=%s" % (
    task, collective.get_rank(), collective.get_world_size(), s[0], e["RANK"], e["WORLD_SIZE"],
    e["MASTER_ADDR"], e["MASTER_PORT"], e["DMLC_TRACKER_PORT"], e["PYTHONUNBUFFERED"]))
collective.finalize()
if t is not None:
    t.join()
`

// XGBoost on the local backend, with real xgboost: the master and two workers form one
// collective from the variables OpenDLC sets (Kubeflow Trainer v2's DMLC_*), with the
// tracker on the gang's rendezvous port, and see training-operator v1's RANK,
// WORLD_SIZE and MASTER_ADDR:MASTER_PORT pointing at the same tracker.
func TestXGBoostCollectiveFromEnv(t *testing.T) {
	ctx := testContext(t)
	ws := workspace(t)
	submit(t, ctx, itest.JobDoc("xgb", ws, fmt.Sprintf(`
  framework: xgboost
  command: [%s, -c, %q]
  # The workers may start before the master's tracker listens.
  env: [{name: DMLC_WORKER_CONNECT_RETRY, value: "10"}]
  roles:
    master: {replicas: 1}
    worker: {replicas: 2}
`, python, xgboostCollective)))
	j := waitTerminal(t, ctx, ws, "xgb")
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("status %s/%s %q, want Succeeded", j.Status.Phase, j.Status.Reason, j.Status.Message)
	}
	var lines []string
	for _, r := range jobLogs(t, ctx, ws, "xgb") {
		if strings.HasPrefix(r.Line, "task ") {
			lines = append(lines, r.Line)
		}
	}
	sort.Strings(lines)
	if len(lines) != 3 {
		t.Fatalf("collective output: %q, want a line per replica", lines)
	}
	port := ""
	for i, l := range lines {
		var task, rank, size, rankEnv, world int
		var sum float64
		var master, tracker, unbuffered string
		if _, err := fmt.Sscanf(l, "task %d rank %d of %d sum %g RANK=%d WORLD_SIZE=%d MASTER=%s tracker=%s unbuffered=%s",
			&task, &rank, &size, &sum, &rankEnv, &world, &master, &tracker, &unbuffered); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if task != i || rank != i || size != 3 || sum != 6 || rankEnv != i || world != 3 || unbuffered != "1" {
			t.Errorf("line %q: want task = rank = RANK = %d of 3, sum 6, PYTHONUNBUFFERED=1", l, i)
		}
		if master != "127.0.0.1:"+tracker || tracker == "0" || (port != "" && tracker != port) {
			t.Errorf("line %q: MASTER_ADDR:MASTER_PORT %s, want 127.0.0.1 and the tracker port %s shared by every replica", l, master, tracker)
		}
		port = tracker
	}
	t.Logf("collective: %q", lines)
}

// slurmTask is one Slurm task as PyTorch Lightning's SLURMEnvironment would set it up:
// global rank SLURM_PROCID, world size SLURM_NTASKS, the store at MASTER_ADDR and
// MASTER_PORT (which Lightning takes from the environment when set). It requires what
// Lightning requires (a numeric SLURM_JOB_ID, SLURM_NTASKS_PER_NODE), sums rank+1 over a
// gloo group, and rank 0 then tells the launcher, which waits on the same store.
const slurmTask = `import datetime, os
import torch, torch.distributed as dist
e = os.environ
job = int(e["SLURM_JOB_ID"])
assert "SLURM_NTASKS_PER_NODE" in e
rank, world = int(e["SLURM_PROCID"]), int(e["SLURM_NTASKS"])
store = dist.TCPStore(e["MASTER_ADDR"], int(e["MASTER_PORT"]), None, rank == 0, datetime.timedelta(seconds=120), False)
dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
print("task %d of %d node %s local %s job %d sum %g" % (rank, world, e["SLURM_NODEID"], e["SLURM_LOCALID"], job, t.item()), flush=True)
dist.barrier()
if rank == 0:
    store.set("done", "1")
    store.wait(["ack"])
`

// slurmBatch is the batch step: it waits until the tasks are done, then succeeds.
const slurmBatch = `import datetime, os
import torch.distributed as dist
e = os.environ
store = dist.TCPStore(e["MASTER_ADDR"], int(e["MASTER_PORT"]), None, False, datetime.timedelta(seconds=120))
store.wait(["done"])
print("batch step of job %d saw the tasks done" % int(e["SLURM_JOB_ID"]), flush=True)
store.set("ack", "1")
`

// Slurm on the local backend, with real torch.distributed: two workers of two GPUs, so
// two tasks each, run one process per task, as srun would (SLURM_LOCALID 0 and 1 on
// each node), and the four form a gloo group the way Lightning's SLURMEnvironment does, from
// SLURM_PROCID, SLURM_NTASKS and MASTER_ADDR:MASTER_PORT (the gang's reserved
// rendezvous port, not one derived from the job id), with a numeric SLURM_JOB_ID; the
// launcher, the batch step, waits for them on the same store and decides.
func TestSlurmTasksRendezvousLikeLightning(t *testing.T) {
	ctx := testContext(t)
	ws := workspace(t)
	submit(t, ctx, itest.JobDoc("slurm", ws, fmt.Sprintf(`
  framework: slurm
  command: [%[1]s, -c, %[2]q]
  roles:
    launcher: {replicas: 1, command: [%[1]s, -c, %[3]q]}
    worker: {replicas: 2, resources: {gpu: 2}}
`, python, slurmTask, slurmBatch)))
	j := waitTerminal(t, ctx, ws, "slurm")
	// The tasks end as soon as the launcher has their result, so the job may see every
	// replica succeeded at once (AllReplicasSucceeded) rather than the launcher first.
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("status %s/%s %q, want Succeeded", j.Status.Phase, j.Status.Reason, j.Status.Message)
	}
	var tasks []string
	batch := ""
	for _, r := range jobLogs(t, ctx, ws, "slurm") {
		switch {
		case strings.HasPrefix(r.Line, "task "):
			tasks = append(tasks, r.Line)
		case strings.HasPrefix(r.Line, "batch step"):
			batch = r.Line
		}
	}
	sort.Strings(tasks)
	t.Logf("tasks %q; %s", tasks, batch)
	if len(tasks) != 4 || batch == "" {
		t.Fatalf("tasks %q, batch step %q: want four tasks and the batch step", tasks, batch)
	}
	var job int
	for i, l := range tasks {
		var rank, world, node, local, id int
		var sum float64
		if _, err := fmt.Sscanf(l, "task %d of %d node %d local %d job %d sum %g", &rank, &world, &node, &local, &id, &sum); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if rank != i || world != 4 || node != i/2 || local != i%2 || sum != 10 || id <= 0 || (job != 0 && id != job) {
			t.Errorf("line %q: want task %d of 4 on node %d as local task %d, sum 10, the job's numeric id", l, i, i/2, i%2)
		}
		job = id
	}
	if batch != fmt.Sprintf("batch step of job %d saw the tasks done", job) {
		t.Errorf("batch step: %q, want job %d", batch, job)
	}
}
