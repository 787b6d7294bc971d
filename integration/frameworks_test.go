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
	ctx := testContext(t)
	ws := workspace(t)
	submit(t, ctx, itest.JobDoc("tf", ws, `
  framework: tensorflow
  command: [sh, -c, 'echo "$TF_CONFIG"; exec sleep 600']
  roles:
    chief: {replicas: 1, command: [sh, -c, 'echo "$TF_CONFIG"; sleep 1']}
    ps: {replicas: 1}
    worker: {replicas: 2}
`))
	j := waitTerminal(t, ctx, ws, "tf")
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
