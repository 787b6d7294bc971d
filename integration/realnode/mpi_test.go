package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/integration/itest"
)

// MPI as mpi-operator runs it, in containers: the workers run sshd, the launcher runs
// mpirun over the hostfile OpenDLC mounted at /etc/mpi/hostfile, reaching the workers
// by their DNS names with the gang's ssh key pair (mounted at /root/.ssh). The ranks run
// in the worker pods, and their allreduce of rank+1 is right.
func TestMPIOverSSHInContainers(t *testing.T) {
	ctx := itest.Context(t, 6*time.Minute)
	const ws, name = "rn-mpi", "mpi"
	submit(t, ctx, job(name, ws, `  framework: mpi
  roles:
    launcher:
      replicas: 1
      command: [sh, examples/mpi/launch.sh, /usr/bin/python3, examples/mpi/allreduce.py]
      env:
        - {name: OMPI_ALLOW_RUN_AS_ROOT, value: "1"}
        - {name: OMPI_ALLOW_RUN_AS_ROOT_CONFIRM, value: "1"}
      resources: {cpu: "200m", memory: 256Mi}
    worker:
      replicas: 2
      command: [/usr/sbin/sshd, -De]
      resources: {cpu: "500m", memory: 512Mi}
  timeout: 5m
`))
	checkMPIAllreduce(t, ctx, ws, name)
}

// The same on the non-root image, as mpi-operator's non-root examples: the workers' sshd
// runs as the image's user on port 2222 with a host key of that user, and the gang's key
// pair is mounted at that user's ~/.ssh (spec.pod.sshAuthMountPath).
func TestMPIOverSSHNonRootInContainers(t *testing.T) {
	ctx := itest.Context(t, 6*time.Minute)
	const ws, name = "rn-mpi-nonroot", "mpi"
	submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  image: %s
  framework: mpi
  pod: {sshAuthMountPath: /home/%s/.ssh}
  roles:
    launcher:
      replicas: 1
      command: [sh, examples/mpi/launch.sh, /usr/bin/python3, examples/mpi/allreduce.py]
      resources: {cpu: "200m", memory: 256Mi}
    worker:
      replicas: 2
      command: [/usr/sbin/sshd, -De, -f, %s]
      resources: {cpu: "500m", memory: 512Mi}
  timeout: 5m
`, name, ws, env.training.NonRoot.Ref, images.TrainingUser, images.NonRootSSHDConfig))
	checkMPIAllreduce(t, ctx, ws, name)
}

// checkMPIAllreduce waits for an MPI job of 2 worker slots running
// examples/mpi/allreduce.py to succeed and checks what the ranks computed, and where.
func checkMPIAllreduce(t *testing.T, ctx context.Context, ws, name string) {
	t.Helper()
	mustSucceed(t, ctx, ws, name)
	type rank struct {
		Rank int    `json:"rank"`
		Host string `json:"host"`
	}
	type result struct {
		Size  int      `json:"size"`
		Sum   int      `json:"sum"`
		Hosts []string `json:"hosts"`
	}
	var res *result
	hosts := map[string]bool{}
	for _, r := range jobLogs(t, ctx, ws, name) {
		if doc, ok := strings.CutPrefix(r.Line, "mpi-result "); ok {
			res = &result{}
			if err := json.Unmarshal([]byte(doc), res); err != nil {
				t.Fatal(err)
			}
		}
		if doc, ok := strings.CutPrefix(r.Line, "mpi-rank "); ok {
			var rk rank
			if err := json.Unmarshal([]byte(doc), &rk); err != nil {
				t.Fatal(err)
			}
			hosts[rk.Host] = true
		}
	}
	if res == nil || res.Size != 2 || res.Sum != 3 {
		t.Fatalf("mpi-result %+v, want 2 ranks whose allreduce of rank+1 is 3", res)
	}
	// Each rank ran in a worker pod (the pod's hostname is worker-N), not the launcher.
	for h := range hosts {
		if !strings.HasPrefix(h, "worker-") {
			t.Errorf("a rank ran on %q, want a worker pod", h)
		}
	}
	if len(hosts) != 2 {
		t.Errorf("ranks ran on %v, want the 2 worker pods", hosts)
	}
}
