package realnode

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// Resource samples on Kubernetes: the worker (--node-stats, a sample every 2 s, as the
// service account of deploy/rbac.yaml and deploy/rbac-node-stats.yaml) reads a
// container that spins (up to its limit of half a core) and holds 150 MiB from its
// node's kubelet statistics summary; the samples name the real node and the
// container's 512 Mi limit, and the succeeded job's status summarises them.
func TestResourceSamplesFromTheKubelet(t *testing.T) {
	t.Parallel()
	reserve(t, "500m")
	ctx := itest.Context(t, 4*time.Minute)
	const ws, name = "rn-resources", "busy"
	submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  framework: custom
  image: %s
  command: [python3, -c, "import time\nheld = b'x' * (150 << 20)\nend = time.time() + 10\nwhile time.time() < end:\n    pass\n"]
  roles:
    worker: {replicas: 1, resources: {cpu: 500m, memory: 512Mi}}
  timeout: 3m
`, name, ws, env.training.Root.Ref))
	var samples []events.ResourceData
	read := func() { samples = itest.ResourceSamples(t, ctx, env.api, ws, name) }
	testutil.Eventually(t, itest.Left(ctx), "a sample of the container holding 150 MiB", func() bool {
		read()
		for _, d := range samples {
			if d.MemoryBytes >= 150<<20 {
				return true
			}
		}
		return false
	}, itest.PollInterval)
	j := itest.WaitJob(t, ctx, env.api, ws, name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job: %s %s", j.Status.Phase, j.Status.Message)
	}
	read()
	for i, d := range samples {
		// The container spins: some CPU at each sample, however loaded the machine.
		// Not "at most its limit of half a core": the kubelet's figure is a rate
		// over cAdvisor's last two readings, whose window is irregular on a loaded
		// machine, and CFS lets a limited container run over its quota within a period
		// (CI saw 1.39); never more than the machine's cores.
		if !strings.HasPrefix(d.Node, kubestack.RealNodePrefix) || d.MemoryLimitBytes != 512<<20 || d.UID != j.UID ||
			d.CPU <= 0.01 || d.CPU > float64(runtime.NumCPU()) {
			t.Errorf("sample %d: %+v, want a real node, the 512 Mi limit, the job's uid and a busy core", i, d)
		}
	}
	u := j.Status.Resources
	if u == nil || u.Samples < 1 || u.PeakMemoryBytes < 150<<20 || u.MemoryLimitBytes != 512<<20 {
		t.Fatalf("status.resources %+v", u)
	}
	t.Logf("%d samples on node %s; status.resources: peak %d MiB of %d MiB, mean %.2f cores, peak %.2f",
		len(samples), samples[0].Node, u.PeakMemoryBytes>>20, u.MemoryLimitBytes>>20, u.MeanCPU, u.PeakCPU)
}
