package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/backend"
)

// GPUs on the local backend.
//
// The inventory is a list of device ids, each what CUDA_VISIBLE_DEVICES takes: the
// index of a whole GPU ("0", "1", ...) or the UUID of a MIG instance ("MIG-..."). It
// comes from WithGPUs (a simulated inventory of n GPUs: "0".."n-1"), or else from
// nvidia-smi -L, or else from /proc/driver/nvidia/gpus. Without an inventory (no GPU
// found, no WithGPUs) GPU requests are not enforced, as before there was one.
//
// With an inventory, Launch gives every replica as many devices as its resources.gpu
// asks for, disjoint from every other replica's, in CUDA_VISIBLE_DEVICES (and sets
// CUDA_DEVICE_ORDER=PCI_BUS_ID, the order nvidia-smi numbers GPUs in); a replica that
// asks for none gets an empty CUDA_VISIBLE_DEVICES. A gang is placed whole or not at
// all: if its replicas do not fit in the free devices, Launch starts nothing and returns
// an error that satisfies errors.Is(err, backend.ErrInsufficientResources).
//
// Allocations are in <stateDir>/.gpus.json, changed under an flock on
// <stateDir>/.gpus.lock, so they survive a worker restart and are shared by every
// Backend on the state directory. A gang's devices are free again once the gang is
// stopped or cleaned up, or once every replica it holds devices for has ended.

// Names of the allocation files in the state directory (dot names: never a gang's).
const (
	gpuAllocFile = ".gpus.json"
	gpuLockFile  = ".gpus.lock"
)

// gpuAllocs is .gpus.json: the devices of each gang, by gang id, then replica name.
type gpuAllocs struct {
	Gangs map[string]map[string][]string `json:"gangs"`
}

// WithGPUs sets a simulated inventory of n GPUs (device ids "0" to "n-1") instead of
// the detected one; n = 0 means no GPUs (every GPU request then waits). Default: the
// GPUs nvidia-smi -L or /proc/driver/nvidia/gpus lists, if any.
func WithGPUs(n int) Option {
	return func(b *Backend) error {
		if n < 0 || n > 1024 {
			return fmt.Errorf("local: gpus %d: want 0 to 1024", n)
		}
		devs := make([]string, n)
		for i := range devs {
			devs[i] = strconv.Itoa(i)
		}
		b.gpus, b.gpusSet = devs, true
		return nil
	}
}

// GPUs returns the inventory (device ids) and whether GPU requests are enforced.
func (b *Backend) GPUs() ([]string, bool) { return slices.Clone(b.gpus), b.gpusSet }

// nvidiaSMILine is a GPU line of nvidia-smi -L: "GPU 0: NVIDIA H100 80GB HBM3 (UUID:
// GPU-...)"; nvidiaMIGLine a MIG instance under it: "  MIG 1g.10gb Device 0: (UUID:
// MIG-...)".
var (
	nvidiaSMILine = regexp.MustCompile(`^GPU (\d+): (.*?)\s*\(UUID: (GPU-[^)\s]+)\)\s*$`)
	nvidiaMIGLine = regexp.MustCompile(`^\s+MIG .*Device\s+\d+: \(UUID: (MIG-[^)\s]+)\)\s*$`)
)

// ParseNvidiaSMIList reads the output of nvidia-smi -L into device ids: a GPU's index,
// or, for a GPU split into MIG instances, the UUID of each instance instead (a process
// sees one MIG instance per CUDA_VISIBLE_DEVICES entry). Other lines are ignored.
func ParseNvidiaSMIList(out string) []string {
	var devs []string
	var gpu string // the last GPU's index, until a MIG line claims it
	flush := func() {
		if gpu != "" {
			devs = append(devs, gpu)
			gpu = ""
		}
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	migOf := ""
	for sc.Scan() {
		line := sc.Text()
		if m := nvidiaSMILine.FindStringSubmatch(line); m != nil {
			flush()
			gpu, migOf = m[1], m[1]
			continue
		}
		if m := nvidiaMIGLine.FindStringSubmatch(line); m != nil && migOf != "" {
			gpu = "" // split: its instances are the devices
			devs = append(devs, m[1])
		}
	}
	flush()
	return devs
}

// ParseProcNvidiaGPUs reads /proc/driver/nvidia/gpus: one directory per GPU, named by
// its PCI bus id, each with an "information" file. The devices are numbered 0, 1, ... in
// bus id order, nvidia-smi's (and CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID) order.
func ParseProcNvidiaGPUs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var buses []string
	for _, e := range entries {
		if exists(filepath.Join(dir, e.Name(), "information")) {
			buses = append(buses, strings.ToLower(e.Name()))
		}
	}
	slices.Sort(buses)
	devs := make([]string, len(buses))
	for i := range buses {
		devs[i] = strconv.Itoa(i)
	}
	return devs, nil
}

// detectGPUs is the host's inventory: nvidia-smi -L's, else /proc's; none when neither
// lists a GPU.
func detectGPUs() []string {
	if path, err := exec.LookPath("nvidia-smi"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, path, "-L").Output(); err == nil {
			if devs := ParseNvidiaSMIList(string(out)); len(devs) > 0 {
				return devs
			}
		}
	}
	devs, _ := ParseProcNvidiaGPUs("/proc/driver/nvidia/gpus")
	return devs
}

// gpuRequests is how many devices each replica of the gang asks for; nil when none asks.
func gpuRequests(spec backend.GangSpec) map[string]int {
	var out map[string]int
	for _, r := range spec.Replicas {
		if r.Resources.GPU > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[r.Name] = int(r.Resources.GPU)
		}
	}
	return out
}

// allocateGPUs returns the devices of each replica of the gang that asks for GPUs:
// those recorded for it, or new ones, disjoint from every live gang's. It returns an
// ErrInsufficientResources error when they do not fit now, and an ErrUnschedulable
// error when they need more GPUs than the inventory holds. Without an inventory it
// allocates nothing.
func (b *Backend) allocateGPUs(ctx context.Context, spec backend.GangSpec) (map[string][]string, error) {
	need := gpuRequests(spec)
	if !b.gpusSet || need == nil {
		return nil, nil
	}
	var out map[string][]string
	err := b.withGPUAllocs(ctx, func(a *gpuAllocs) (bool, error) {
		if got, ok := a.Gangs[spec.ID()]; ok {
			out = got
			return false, nil
		}
		used := map[string]bool{}
		for _, reps := range a.Gangs {
			for _, devs := range reps {
				for _, d := range devs {
					used[d] = true
				}
			}
		}
		var free []string
		for _, d := range b.gpus {
			if !used[d] {
				free = append(free, d)
			}
		}
		total := 0
		for _, n := range need {
			total += n
		}
		if total > len(b.gpus) {
			// Not even every GPU of this host would do: waiting for other gangs cannot help.
			return false, backend.Unschedulable(fmt.Errorf("cannot fit even with every GPU free: the gang needs %d GPUs, this host has %d", total, len(b.gpus)))
		}
		if total > len(free) {
			return false, backend.InsufficientResources(fmt.Errorf("waiting for %d GPUs: %d of %d free", total, len(free), len(b.gpus)))
		}
		out = map[string][]string{}
		for _, r := range spec.Replicas { // in spec order: the same gang gets the same devices
			if n := need[r.Name]; n > 0 {
				out[r.Name], free = free[:n:n], free[n:]
			}
		}
		a.Gangs[spec.ID()] = out
		return true, nil
	})
	return out, err
}

// releaseGPUs frees the gang's devices.
func (b *Backend) releaseGPUs(ctx context.Context, id string) error {
	if !b.gpusSet {
		return nil
	}
	return b.withGPUAllocs(ctx, func(a *gpuAllocs) (bool, error) {
		_, ok := a.Gangs[id]
		delete(a.Gangs, id)
		return ok, nil
	})
}

// withGPUAllocs runs fn on the allocations with .gpus.lock held, after dropping those of
// gangs that are gone, stopped, or whose replicas have all ended; it writes them back
// when fn (or the dropping) changed them.
func (b *Backend) withGPUAllocs(ctx context.Context, fn func(*gpuAllocs) (bool, error)) error {
	f, err := os.OpenFile(filepath.Join(b.stateDir, gpuLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("local: gpus: %w", err)
	}
	defer f.Close()
	if err := flock(ctx, f); err != nil {
		return fmt.Errorf("local: gpus: %w", err)
	}
	path := filepath.Join(b.stateDir, gpuAllocFile)
	a := gpuAllocs{Gangs: map[string]map[string][]string{}}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &a); err != nil {
			return fmt.Errorf("local: %s: %w", path, err)
		}
		if a.Gangs == nil {
			a.Gangs = map[string]map[string][]string{}
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("local: gpus: %w", err)
	}
	changed := false
	for id, reps := range a.Gangs {
		if !b.holdsGPUs(id, reps) {
			delete(a.Gangs, id)
			changed = true
		}
	}
	ch, err := fn(&a)
	if err != nil {
		return err
	}
	if !changed && !ch {
		return nil
	}
	out, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("local: gpus: %w", err)
	}
	if err := writeFileAtomic(path, append(out, '\n')); err != nil {
		return fmt.Errorf("local: gpus: %w", err)
	}
	return nil
}

// holdsGPUs reports whether a gang still needs its devices: its directory is there, it
// was not stopped, and a replica it holds devices for has not ended (or not started).
func (b *Backend) holdsGPUs(id string, reps map[string][]string) bool {
	dir := b.gangDir(id)
	if !exists(filepath.Join(dir, stateFile)) || exists(filepath.Join(dir, stoppedFile)) {
		return false
	}
	for name := range reps {
		if !exists(filepath.Join(dir, name, exitFile)) {
			return true
		}
	}
	return false
}

// gpuEnv is the CUDA environment of a replica: its devices, or none.
func gpuEnv(devs []string) []string {
	return []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + strings.Join(devs, ",")}
}
