//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// A replica whose child process spins a core and holds 200 MiB, with two GPUs: two
// samples a second apart read about one core, at least 200 MiB resident, the
// replica's memory resource as its limit, and its own two GPUs (of the four
// nvidia-smi lists); an ended replica is not running.
func TestSampleResources(t *testing.T) {
	bin := t.TempDir()
	// nvidia-smi's answer to SampleResources' query, as the real one prints it.
	smi := "#!/bin/sh\n" +
		`[ "$1" = "--query-gpu=` + nvidiaSMIQuery + `" ] && [ "$2" = --format=csv,noheader,nounits ] || exit 9` + "\n" +
		"cat <<'EOF'\n" +
		"0, GPU-6b1d7f3c-0d7e-4a31-9f8e-6d2b0c7a1e01, 97, 61440, 81559\n" +
		"1, GPU-6b1d7f3c-0d7e-4a31-9f8e-6d2b0c7a1e02, 91, 60012, 81559\n" +
		"2, GPU-6b1d7f3c-0d7e-4a31-9f8e-6d2b0c7a1e03, 0, 1, 81559\n" +
		"3, GPU-6b1d7f3c-0d7e-4a31-9f8e-6d2b0c7a1e04, [N/A], [N/A], 81559\n" +
		"EOF\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	b := newBackend(t, WithGPUs(4))
	mem := resource.MustParse("1Gi")
	r := rep("worker", 0, "sh", "-c", `python3 -c '
import time
held = b"x" * (200 << 20)
end = time.time() + 60
while time.time() < end:
    pass
' & wait`)
	r.Resources = schemas.Resources{GPU: 2, Memory: &mem}
	g := gangOf(t, schemas.FrameworkCustom, r)
	launch(t, b, g)
	waitFor(t, b, g.GangRef, "running", running)
	ctx := context.Background()
	name := g.Replicas[0].Name
	var first backend.ResourceSample
	testutil.Eventually(t, 20*time.Second, "200 MiB resident", func() bool {
		s, err := b.SampleResources(ctx, g.GangRef, name)
		if err != nil {
			t.Fatal(err)
		}
		first = s
		return s.MemoryBytes >= 200<<20
	}, 100*time.Millisecond)
	// A second reading at least a second after the first, for the CPU between them.
	var second backend.ResourceSample
	testutil.Eventually(t, 20*time.Second, "a reading a second after the first", func() bool {
		s, err := b.SampleResources(ctx, g.GangRef, name)
		if err != nil {
			t.Fatal(err)
		}
		second = s
		return s.Time.Sub(first.Time) >= time.Second
	}, 100*time.Millisecond)
	cores := (second.CPUSeconds - first.CPUSeconds) / second.Time.Sub(first.Time).Seconds()
	t.Logf("cores %.2f, memory %d MiB of %d MiB, gpus %+v", cores, second.MemoryBytes>>20, second.MemoryLimitBytes>>20, second.GPUs)
	// One core busy: some of it, however loaded the machine, and no more than a core.
	if cores <= 0.01 || cores > 1.3 {
		t.Errorf("cores %.2f, want about 1", cores)
	}
	if second.MemoryLimitBytes != 1<<30 || second.Node != "test-node" {
		t.Errorf("limit %d, node %q; want 1 GiB, test-node", second.MemoryLimitBytes, second.Node)
	}
	if len(second.GPUs) != 2 || second.GPUs[0].Index != 0 || second.GPUs[1].Index != 1 ||
		second.GPUs[0].Utilization != 97 || second.GPUs[1].MemoryUsedBytes != 60012<<20 || second.GPUs[0].MemoryTotalBytes != 81559<<20 {
		t.Errorf("gpus %+v, want devices 0 and 1 as nvidia-smi reads them", second.GPUs)
	}
	if err := b.Stop(ctx, g.GangRef); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, g.GangRef, "stopped", terminal)
	if _, err := b.SampleResources(ctx, g.GangRef, name); !errors.Is(err, backend.ErrNotRunning) {
		t.Errorf("a stopped replica: %v, want ErrNotRunning", err)
	}
}

func TestParseNvidiaSMIQuery(t *testing.T) {
	out := "0, GPU-aa, 37, 1024, 81559\n1, GPU-bb, [N/A], [N/A], 81559\n\n2, GPU-cc, 0, 0, 40960\n"
	got := ParseNvidiaSMIQuery(out)
	if len(got) != 2 || got[0].UUID != "GPU-aa" || got[0].Utilization != 37 || got[0].MemoryUsedBytes != 1024<<20 ||
		got[1].Index != 2 || got[1].MemoryTotalBytes != 40960<<20 {
		t.Errorf("ParseNvidiaSMIQuery = %+v", got)
	}
}
