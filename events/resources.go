package events

import "fmt"

// TypeJobResources is the type of a sample of what a replica uses: CPU, memory and GPUs. Data:
// ResourceData. Published on JobResourcesSubject at a bounded rate while the replica
// runs (docs/metrics.md, "Resource use").
const TypeJobResources = "opendlc.job.resources.v1"

// ResourceData is the data of a TypeJobResources event: one sample of one replica.
type ResourceData struct {
	Job     string `json:"job"`
	UID     string `json:"uid"`
	Attempt int    `json:"attempt"`
	Replica string `json:"replica"`
	// Node is where the replica runs (the Kubernetes node), when known.
	Node string `json:"node,omitempty"`
	// Seq numbers the replica's samples within the attempt, from 1.
	Seq int64 `json:"seq"`
	// CPU is the CPU the replica's processes used since the previous sample, in cores
	// (1.0: one core busy all the time).
	CPU float64 `json:"cpu"`
	// MemoryBytes is the replica's memory in use: the resident set of its processes
	// (local backend), the container's working set (Kubernetes).
	MemoryBytes int64 `json:"memoryBytes"`
	// MemoryLimitBytes is the replica's memory limit, 0 when it has none.
	MemoryLimitBytes int64 `json:"memoryLimitBytes,omitempty"`
	// GPUs are the replica's GPUs, when they can be read.
	GPUs []GPUSample `json:"gpus,omitempty"`
}

// GPUSample is one GPU of a replica at a sample.
type GPUSample struct {
	// Index is the GPU's index on its host (nvidia-smi's index, DCGM's gpu label).
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	// Utilization is the percentage of the sample period a kernel ran, 0 to 100.
	Utilization float64 `json:"utilization"`
	// MemoryUsedBytes and MemoryTotalBytes are the GPU's frame buffer.
	MemoryUsedBytes  int64 `json:"memoryUsedBytes"`
	MemoryTotalBytes int64 `json:"memoryTotalBytes,omitempty"`
}

// JobResourcesSubject carries a job's resource samples.
func JobResourcesSubject(workspace, job string) string {
	return fmt.Sprintf("dlc.%s.job.%s.resources", workspace, job)
}

// The resource metrics of a sample, by the names alerts and summaries use
// (ResourceMetrics).
const (
	// ResourceCPU is CPU in cores.
	ResourceCPU = "cpu"
	// ResourceMemoryBytes is memory in use, in bytes.
	ResourceMemoryBytes = "memory.bytes"
	// ResourceMemory is memory in use as a percentage of the limit (absent without one).
	ResourceMemory = "memory"
	// ResourceGPUUtilization is the mean utilization of the replica's GPUs, percent.
	ResourceGPUUtilization = "gpu.utilization"
	// ResourceGPUMemory is the GPUs' memory in use as a percentage of theirs.
	ResourceGPUMemory = "gpu.memory"
)

// ResourceMetrics are a sample's values by resource metric name: cpu and memory.bytes
// always; memory with a limit; gpu.utilization and gpu.memory with GPUs.
func (d ResourceData) ResourceMetrics() map[string]float64 {
	m := map[string]float64{ResourceCPU: d.CPU, ResourceMemoryBytes: float64(d.MemoryBytes)}
	if d.MemoryLimitBytes > 0 {
		m[ResourceMemory] = 100 * float64(d.MemoryBytes) / float64(d.MemoryLimitBytes)
	}
	if len(d.GPUs) > 0 {
		var util float64
		var used, total int64
		for _, g := range d.GPUs {
			util += g.Utilization
			used += g.MemoryUsedBytes
			total += g.MemoryTotalBytes
		}
		m[ResourceGPUUtilization] = util / float64(len(d.GPUs))
		if total > 0 {
			m[ResourceGPUMemory] = 100 * float64(used) / float64(total)
		}
	}
	return m
}
