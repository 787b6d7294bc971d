package realnode

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/integration/itest"
)

// conventionJob is a job of the training image in workspace rn-conv whose every replica
// runs command in sh, with roles (YAML lines, indented by four spaces) under roles.
func conventionJob(name, framework, command, roles string) string {
	return job(name, "rn-conv", fmt.Sprintf(`  framework: %s
  command: [sh, -c, %q]
  roles:
%s  timeout: 3m
`, framework, command, roles))
}

// linesWith returns what follows prefix in each log line of a job, by "role-index".
func linesWith(t *testing.T, name, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range jobLogs(t, itest.Context(t, time.Minute), "rn-conv", name) {
		if v, ok := strings.CutPrefix(r.Line, prefix); ok {
			out[fmt.Sprintf("%s-%d", r.Role, r.Index)] = v
		}
	}
	return out
}

// The conventions of docs/frameworks.md that only a container shows, each read inside
// one: DeepSpeed's hostfile on disk at /job/hostfile (one "host slots=N" line per
// replica, the pods' DNS names); a preprocess shard's JOB_COMPLETION_INDEX (Kubernetes
// Indexed Job's); PaddleJob's PADDLE_MASTER, which on the master is its own pod address
// (POD_IP_DUMMY, expanded by the kubelet) and elsewhere the master's DNS name; a
// TensorFlow job whose chief is named master, written as the chief in TF_CONFIG; and
// PAI-DLC's KUBERNETES_CONTAINER_RESOURCE_GPU (0 on a CPU replica).
func TestFrameworkConventionsInsideContainers(t *testing.T) {
	t.Parallel()
	// 4 jobs of 2 pods at once.
	reserve(t, "100m", "100m", "100m", "100m", "100m", "100m", "100m", "100m")
	ctx := itest.Context(t, 8*time.Minute)
	two := "    master: {replicas: 1, resources: {cpu: 100m, memory: 128Mi}}\n    worker: {replicas: 1, resources: {cpu: 100m, memory: 128Mi}}\n"
	submit(t, ctx, conventionJob("ds", "deepspeed",
		`echo "hostfile-path $DLC_HOSTFILE"; sed 's/^/hostfile /' /job/hostfile; echo "gpu $KUBERNETES_CONTAINER_RESOURCE_GPU"`, two))
	submit(t, ctx, conventionJob("shards", "preprocess", `echo "index $JOB_COMPLETION_INDEX $DLC_SHARD_INDEX"`,
		"    worker: {replicas: 2, resources: {cpu: 100m, memory: 64Mi}}\n"))
	// The pod's own address, from the hosts file the kubelet writes.
	submit(t, ctx, conventionJob("paddle", "paddle",
		`echo "paddle $PADDLE_MASTER $PADDLE_NNODES $PADDLE_JOB_ID $(grep -w "$(cat /etc/hostname)" /etc/hosts | cut -f1 | head -n1)"`, two))
	submit(t, ctx, conventionJob("tf", "tensorflow", `echo "tf $TF_CONFIG"`, two))
	for _, name := range []string{"ds", "shards", "paddle", "tf"} {
		mustSucceed(t, ctx, "rn-conv", name)
	}

	// DeepSpeed: the file, where its launcher reads it by default.
	paths := linesWith(t, "ds", "hostfile-path ")
	hostfile := linesWith(t, "ds", "hostfile ")
	if paths["master-0"] != "/job/hostfile" || len(hostfile) == 0 {
		t.Errorf("deepspeed: DLC_HOSTFILE %v, hostfile lines %v; want /job/hostfile with lines", paths, hostfile)
	}
	for _, r := range jobLogs(t, ctx, "rn-conv", "ds") {
		if line, ok := strings.CutPrefix(r.Line, "hostfile "); ok && !regexp.MustCompile(`^\S+\.svc slots=\d+$`).MatchString(line) {
			t.Errorf("deepspeed: hostfile line %q, want \"<pod DNS name> slots=N\"", line)
		}
	}
	if g := linesWith(t, "ds", "gpu "); g["master-0"] != "0" || g["worker-0"] != "0" {
		t.Errorf("KUBERNETES_CONTAINER_RESOURCE_GPU %v, want 0 on both CPU replicas", g)
	}

	// preprocess: each shard's index, as an Indexed Job gives it.
	if idx := linesWith(t, "shards", "index "); idx["worker-0"] != "0 0" || idx["worker-1"] != "1 1" {
		t.Errorf("JOB_COMPLETION_INDEX and DLC_SHARD_INDEX per shard %v, want 0 0 and 1 1", idx)
	}

	// paddle: the master's own address (expanded by the kubelet) on the master.
	pp := linesWith(t, "paddle", "paddle ")
	if m := strings.Fields(pp["master-0"]); len(m) != 4 || net.ParseIP(m[3]) == nil || m[0] != m[3]+":36543" || m[1] != "2" || m[2] != "paddle" {
		t.Errorf("paddle master: %q, want PADDLE_MASTER=<its own pod IP>:36543, PADDLE_NNODES=2, PADDLE_JOB_ID=paddle, then the pod IP", pp["master-0"])
	}
	if w := strings.Fields(pp["worker-0"]); len(w) != 4 || !strings.HasSuffix(w[0], ":36543") || strings.HasPrefix(w[0], "$(") {
		t.Errorf("paddle worker: %q, want the master's address on port 36543", pp["worker-0"])
	}

	// tensorflow: the role named master is TF_CONFIG's chief.
	for replica, doc := range linesWith(t, "tf", "tf ") {
		var cfg struct {
			Cluster map[string][]string `json:"cluster"`
			Task    struct {
				Type  string `json:"type"`
				Index int    `json:"index"`
			} `json:"task"`
		}
		if err := json.Unmarshal([]byte(doc), &cfg); err != nil {
			t.Fatalf("tf %s: TF_CONFIG %q: %v", replica, doc, err)
		}
		if len(cfg.Cluster["chief"]) != 1 || cfg.Cluster["master"] != nil {
			t.Errorf("tf %s: cluster %v, want the master as the one chief", replica, cfg.Cluster)
		}
		if want := map[string]string{"master-0": "chief", "worker-0": "worker"}[replica]; cfg.Task.Type != want {
			t.Errorf("tf %s: task type %q, want %q", replica, cfg.Task.Type, want)
		}
	}
}
