package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// The local backend's resource samples on the real stack (the shared stack samples
// every 2 s): two replicas that each spin a core and hold 150 MiB publish
// opendlc.job.resources.v1 events that say so, `dlc job top` shows each replica's
// latest sample while they run, and the succeeded job's status summarises them.
func TestResourceSamplesOfLocalReplicas(t *testing.T) {
	t.Parallel()
	if _, err := buildDLC(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	ws := workspace(t)
	submit(t, ctx, itest.JobDoc("busy", ws, `
  framework: custom
  command: [/usr/bin/python3, -c, "import time\nheld = b'x' * (150 << 20)\nend = time.time() + 20\nwhile time.time() < end:\n    pass\n"]
  roles: {worker: {replicas: 2, resources: {memory: 1Gi}}}
`))
	dlcCLI := dlcRunner(t, ctx, ws)
	samples := map[string][]events.ResourceData{}
	readSamples := func() {
		samples = map[string][]events.ResourceData{}
		for _, d := range itest.ResourceSamples(t, ctx, env.api, ws, "busy") {
			samples[d.Replica] = append(samples[d.Replica], d)
		}
	}
	// While they run: a sample of each holding the memory, and dlc job top showing it.
	var top string
	testutil.Eventually(t, itest.Left(ctx), "a sample of each replica holding 150 MiB, shown by dlc job top", func() error {
		readSamples()
		for _, r := range []string{"busy-worker-0-a0", "busy-worker-1-a0"} {
			held := false
			for _, d := range samples[r] {
				held = held || d.MemoryBytes >= 150<<20
			}
			if !held {
				return fmt.Errorf("replica %s: samples %+v", r, samples[r])
			}
		}
		out, err := dlcCLI("job", "top", "busy")
		if err != nil {
			return fmt.Errorf("dlc job top: %w: %s", err, out)
		}
		top = out
		return nil
	}, 500*time.Millisecond)
	if j, err := env.api.GetJob(ctx, ws, "busy"); err != nil || j.Status.Phase != schemas.JobRunning {
		t.Fatalf("the job was no longer running when dlc job top answered: %v %v", j.Status.Phase, err)
	}
	t.Logf("dlc job top busy:\n%s", top)
	for _, want := range []string{"REPLICA", "busy-worker-0-a0", "busy-worker-1-a0", "of 1.0Gi"} {
		if !strings.Contains(top, want) {
			t.Errorf("dlc job top does not show %q:\n%s", want, top)
		}
	}
	j := waitTerminal(t, ctx, ws, "busy")
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job: %s %s", j.Status.Phase, j.Status.Message)
	}
	readSamples()
	for r, s := range samples {
		for i, d := range s {
			// Each replica spins a core while it holds its 150 MiB: every sample of it then
			// saw some CPU (how much depends on the machine's load: 0.07 to 0.99 cores
			// seen on 2 cores); no sample is of an ended replica (memory 0) or shows more
			// than a core.
			busy := d.MemoryBytes >= 150<<20
			if d.Job != "busy" || d.UID != j.UID || d.MemoryLimitBytes != 1<<30 || (i > 0 && d.Seq <= s[i-1].Seq) ||
				d.MemoryBytes == 0 || (busy && d.CPU <= 0.01) || d.CPU > 1.2 {
				t.Errorf("replica %s sample %d: %+v", r, i, d)
			}
		}
	}
	u := j.Status.Resources
	if u == nil || len(u.Replicas) != 2 || u.Samples < 2 || u.PeakMemoryBytes < 150<<20 || u.MemoryLimitBytes != 1<<30 || u.MeanCPU <= 0.01 {
		t.Fatalf("status.resources %+v, want two replicas' samples with 150 MiB at peak", u)
	}
	n := 0
	for _, s := range samples {
		n += len(s)
	}
	t.Logf("%d samples of 2 replicas; status.resources: %d samples, peak %d MiB, mean %.2f cores, peak %.2f", n, u.Samples, u.PeakMemoryBytes>>20, u.MeanCPU, u.PeakCPU)
	if u.Samples > n {
		t.Errorf("the summary counts %d samples, the stream holds %d", u.Samples, n)
	}
}
