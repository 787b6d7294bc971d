package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opendlc/opendlc/backend"
)

// Resource use of a replica (backend.ResourceSampler): its processes are the
// supervisor and every process descended from it (a replica in the sandbox runs in a
// session of its own, still under the supervisor), read from /proc: CPU time (user and
// system, of the processes and of the children they reaped) and resident memory (the
// sum of their resident sets: pages shared between them count once per process). The
// memory limit is the replica's resources.memory, which the local backend does not
// enforce. GPUs are the replica's devices (gpus.go) as nvidia-smi --query-gpu reads
// them; a MIG instance, whose utilization nvidia-smi does not report, is left out.

var _ backend.ResourceSampler = (*Backend)(nil)

// nvidiaSMIQuery is what SampleResources asks nvidia-smi for, in this order.
const nvidiaSMIQuery = "index,uuid,utilization.gpu,memory.used,memory.total"

// SampleResources reads what replica uses now.
func (b *Backend) SampleResources(ctx context.Context, ref backend.GangRef, replica string) (backend.ResourceSample, error) {
	if !canScanProcs {
		return backend.ResourceSample{}, errors.New("local: resource use is read from /proc, which this system has not")
	}
	dir := b.gangDir(ref.ID())
	rdir := filepath.Join(dir, replica)
	pid := readPid(rdir)
	if !isPathElem(replica) || pid == 0 || !b.supervising(rdir, pid) {
		return backend.ResourceSample{}, fmt.Errorf("%w: %s", backend.ErrNotRunning, replica)
	}
	s := backend.ResourceSample{Time: time.Now(), Node: b.node}
	// The supervisor first: once it has ended (a zombie until the worker reaps it), the
	// replica has too, and what is left of its tree is no reading of it.
	supCPU, supRSS, ok := procUsage(pid)
	if !ok {
		return backend.ResourceSample{}, fmt.Errorf("%w: %s is ending", backend.ErrNotRunning, replica)
	}
	s.CPUSeconds, s.MemoryBytes = supCPU, supRSS
	for _, p := range descendants(pid, b.procChildren())[1:] {
		if cpu, rss, ok := procUsage(p); ok {
			s.CPUSeconds += cpu
			s.MemoryBytes += rss
		}
	}
	st, err := readState(dir)
	if err != nil {
		return backend.ResourceSample{}, err
	}
	for _, r := range st.Spec.Replicas {
		if r.Name == replica && r.Resources.Memory != nil {
			s.MemoryLimitBytes = r.Resources.Memory.Value()
		}
	}
	if devs := b.replicaGPUs(ctx, ref.ID(), replica); len(devs) > 0 {
		for _, g := range b.hostGPUs(ctx) {
			if slices.Contains(devs, strconv.Itoa(g.Index)) {
				s.GPUs = append(s.GPUs, g)
			}
		}
	}
	return s, nil
}

// readingsMaxAge is how long one scan of /proc and one nvidia-smi reading serve the
// samples of every replica: the forwarders sample their replicas at about the same
// time, and one scan each would cost as many as there are replicas.
const readingsMaxAge = time.Second

// readings are the host-wide readings the samples share, taken at most every
// readingsMaxAge.
type readings struct {
	mu       sync.Mutex
	procsAt  time.Time
	children map[int][]int
	gpusAt   time.Time
	gpus     []backend.GPUReading
}

// procChildren is every live process's children, by parent pid.
func (b *Backend) procChildren() map[int][]int {
	r := &b.readings
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.procsAt) > readingsMaxAge {
		children := map[int][]int{}
		for _, p := range liveProcs() {
			children[p.ppid] = append(children[p.ppid], p.pid)
		}
		r.children, r.procsAt = children, time.Now()
	}
	return r.children
}

// hostGPUs is nvidia-smi's reading of the host's GPUs.
func (b *Backend) hostGPUs(ctx context.Context) []backend.GPUReading {
	r := &b.readings
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.gpusAt) > readingsMaxAge {
		r.gpus, r.gpusAt = queryGPUs(ctx), time.Now()
	}
	return r.gpus
}

// descendants are pid and every live process descended from it.
func descendants(pid int, children map[int][]int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// replicaGPUs are the devices allocated to a replica (gpus.go), nil without any.
func (b *Backend) replicaGPUs(ctx context.Context, gang, replica string) []string {
	if !b.gpusSet {
		return nil
	}
	var devs []string
	_ = b.withGPUAllocs(ctx, func(a *gpuAllocs) (bool, error) {
		devs = slices.Clone(a.Gangs[gang][replica])
		return false, nil
	})
	return devs
}

// queryGPUs reads the host's GPUs with nvidia-smi; none when it is missing or fails.
func queryGPUs(ctx context.Context) []backend.GPUReading {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu="+nvidiaSMIQuery, "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil
	}
	return ParseNvidiaSMIQuery(string(out))
}

// ParseNvidiaSMIQuery reads the output of nvidia-smi
// --query-gpu=index,uuid,utilization.gpu,memory.used,memory.total
// --format=csv,noheader,nounits: one line per GPU, "0, GPU-<uuid>, 37, 1024, 81559"
// (percent, MiB, MiB). A line whose values are not numbers ("[N/A]", "[Not
// Supported]") is left out.
func ParseNvidiaSMIQuery(out string) []backend.GPUReading {
	var gpus []backend.GPUReading
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != 5 {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		idx, err1 := strconv.Atoi(f[0])
		util, err2 := strconv.ParseFloat(f[2], 64)
		used, err3 := strconv.ParseFloat(f[3], 64)
		total, err4 := strconv.ParseFloat(f[4], 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		gpus = append(gpus, backend.GPUReading{Index: idx, UUID: f[1], Utilization: util,
			MemoryUsedBytes: int64(used * (1 << 20)), MemoryTotalBytes: int64(total * (1 << 20))})
	}
	return gpus
}
