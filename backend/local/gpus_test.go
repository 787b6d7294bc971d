//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// nvidia-smi -L output in the formats the driver prints (testdata/nvidia-smi): whole
// GPUs are their indexes, a GPU split into MIG instances is its instances' UUIDs, and
// no GPU (or no driver) is an empty inventory.
func TestParseNvidiaSMIList(t *testing.T) {
	tests := map[string][]string{
		"h100x4.txt":    {"0", "1", "2", "3"},
		"a100-mig.txt":  {"MIG-8e2f6a4c-1d9b-5e37-a0c8-4b6f2d9e1a73", "MIG-1a7c3e9f-5b2d-5f84-b6e1-9d3a7c5f2e08", "1"},
		"none.txt":      nil,
		"no-driver.txt": nil,
	}
	for file, want := range tests {
		out, err := os.ReadFile(filepath.Join("testdata", "nvidia-smi", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := ParseNvidiaSMIList(string(out)); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
}

// /proc/driver/nvidia/gpus has a directory per GPU, named by PCI bus id: the devices are
// numbered in bus order; directories without an information file are not GPUs.
func TestParseProcNvidiaGPUs(t *testing.T) {
	dir := t.TempDir()
	for _, bus := range []string{"0000:c1:00.0", "0000:41:00.0", "0000:81:00.0"} {
		if err := os.MkdirAll(filepath.Join(dir, bus), 0o700); err != nil {
			t.Fatal(err)
		}
		info := "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 123\nBus Location: \t " + bus + "\nDevice Minor: \t 0\n"
		if err := os.WriteFile(filepath.Join(dir, bus, "information"), []byte(info), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "not-a-gpu"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := ParseProcNvidiaGPUs(dir)
	if err != nil || !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("ParseProcNvidiaGPUs = %q, %v; want 0 1 2", got, err)
	}
	if _, err := ParseProcNvidiaGPUs(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing /proc directory is not an error")
	}
}

func TestWithGPUsRefusesANegativeCount(t *testing.T) {
	if _, err := New(WithStateDir(t.TempDir()), WithGPUs(-1)); err == nil || !strings.Contains(err.Error(), "gpus -1") {
		t.Errorf("New(WithGPUs(-1)) error = %v", err)
	}
}

// gpuRep is a replica asking for n GPUs that prints its CUDA_VISIBLE_DEVICES and then
// waits for the file release to exist.
func gpuRep(index, n int, release string) backend.ReplicaSpec {
	r := rep("worker", index, "sh", "-c", `echo "cuda=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER"; while [ ! -e "$0" ]; do sleep 0.05; done`, release)
	r.Resources = schemas.Resources{GPU: int32(n)}
	return r
}

// devicesOf reads the devices a replica printed.
func devicesOf(t *testing.T, b *Backend, g backend.GangSpec, i int) []string {
	t.Helper()
	line := firstLines(t, b, g.GangRef, g.Replicas[i].Name, 1)[0].Line
	v, ok := strings.CutPrefix(line, "cuda=")
	if !ok || !strings.HasSuffix(v, " order=PCI_BUS_ID") {
		t.Fatalf("replica %d printed %q", i, line)
	}
	v = strings.TrimSuffix(v, " order=PCI_BUS_ID")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Replicas get disjoint devices, as many as they ask for; a gang that does not fit
// starts nothing and says what it waits for; the allocation is shared by a second
// Backend on the same state directory (another worker, or this one restarted); it is
// released when the gang is stopped, cleaned up, or has ended; a released device goes
// to the next gang.
func TestGPUAllocation(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	release := filepath.Join(t.TempDir(), "release")
	b := newBackend(t, WithStateDir(state), WithGPUs(4))
	if devs, on := b.GPUs(); !on || len(devs) != 4 {
		t.Fatalf("GPUs() = %q, %v", devs, on)
	}

	first := gangOf(t, schemas.FrameworkCustom, gpuRep(0, 2, release), gpuRep(1, 1, release), gpuRep(2, 0, release))
	first.Job += "-first"
	for i := range first.Replicas {
		first.Replicas[i].Name = first.ReplicaName(first.Replicas[i].Role, first.Replicas[i].Index)
	}
	launch(t, b, first)
	got := [][]string{devicesOf(t, b, first, 0), devicesOf(t, b, first, 1), devicesOf(t, b, first, 2)}
	if !slices.Equal(got[0], []string{"0", "1"}) || !slices.Equal(got[1], []string{"2"}) || got[2] != nil {
		t.Fatalf("devices %q, want [0 1] [2] []", got)
	}
	// Launch again (a retried activity): the same devices, nothing new.
	if err := b.Launch(ctx, first); err != nil {
		t.Fatalf("second Launch: %v", err)
	}

	// A second worker on the same state directory sees the first gang's devices taken.
	other, err := New(WithStateDir(state), WithNode("test-node"), WithGPUs(4))
	if err != nil {
		t.Fatal(err)
	}
	second := gangOf(t, schemas.FrameworkCustom, gpuRep(0, 2, release))
	second.Job += "-second"
	second.Replicas[0].Name = second.ReplicaName("worker", 0)
	err = other.Launch(ctx, second)
	if !errors.Is(err, backend.ErrInsufficientResources) || err.Error() != "waiting for 2 GPUs: 1 of 4 free" {
		t.Fatalf("Launch of a gang that does not fit: %v", err)
	}
	if st, err := other.Observe(ctx, second.GangRef); err != nil || st.Replicas[0].Phase != schemas.ReplicaPending {
		t.Fatalf("the refused gang: %+v, %v; want its replica Pending (not started)", st, err)
	}
	if exists(filepath.Join(other.gangDir(second.ID()), second.Replicas[0].Name)) {
		t.Fatal("the refused gang's replica was claimed")
	}

	// Stopping the first gang frees its devices: the second fits now.
	if err := b.Stop(ctx, first.GangRef); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop(context.Background(), second.GangRef) })
	if err := other.Launch(ctx, second); err != nil {
		t.Fatalf("Launch after the first gang stopped: %v", err)
	}
	if d := devicesOf(t, other, second, 0); !slices.Equal(d, []string{"0", "1"}) {
		t.Errorf("second gang's devices %q, want [0 1]", d)
	}

	// A gang whose replicas have all ended holds nothing, even before its cleanup.
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, other, second.GangRef, "second gang ended", terminal)
	third := gangOf(t, schemas.FrameworkCustom, gpuRep(0, 4, release))
	third.Job += "-third"
	third.Replicas[0].Name = third.ReplicaName("worker", 0)
	launch(t, b, third)
	if d := devicesOf(t, b, third, 0); !slices.Equal(d, []string{"0", "1", "2", "3"}) {
		t.Errorf("third gang's devices %q, want all four", d)
	}
	// Cleanup releases too.
	waitFor(t, b, third.GangRef, "third gang ended", terminal)
	if err := b.Cleanup(ctx, third.GangRef); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(state, gpuAllocFile))
	if err != nil || strings.Contains(string(data), third.ID()) {
		t.Errorf("after cleanup, %s = %s (%v)", gpuAllocFile, data, err)
	}
}

// Without an inventory (no GPU found, no WithGPUs), GPU requests are not enforced and
// the environment is left alone.
func TestNoGPUInventoryEnforcesNothing(t *testing.T) {
	b := newBackend(t)
	b.gpus, b.gpusSet = nil, false // as on a host where detection found nothing
	r := rep("worker", 0, "sh", "-c", `echo "cuda=${CUDA_VISIBLE_DEVICES-unset}"`)
	r.Resources = schemas.Resources{GPU: 8}
	g := gangOf(t, schemas.FrameworkCustom, r)
	launch(t, b, g)
	waitFor(t, b, g.GangRef, "ended", terminal)
	if l := logs(t, b, g.GangRef, g.Replicas[0].Name, 0); len(l) != 1 || l[0].Line != "cuda=unset" {
		t.Errorf("output %+v, want cuda=unset", l)
	}
}
