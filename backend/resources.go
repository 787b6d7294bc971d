package backend

import (
	"context"
	"errors"
	"time"
)

// ErrNotRunning is answered by SampleResources for a replica that does not run (yet, or
// any more).
var ErrNotRunning = errors.New("backend: replica not running")

// ResourceSampler is implemented by backends that can read what a running replica
// uses. The job's log forwarder samples each replica at a bounded rate and publishes
// the samples (events.TypeJobResources).
type ResourceSampler interface {
	// SampleResources reads replica's use now. A replica that is not running answers
	// an error wrapping ErrNotRunning; a backend that cannot sample as configured, one
	// wrapping errors.ErrUnsupported (the forwarder then stops asking).
	SampleResources(ctx context.Context, ref GangRef, replica string) (ResourceSample, error)
}

// ResourceSample is one reading of a replica's resources.
type ResourceSample struct {
	// Time is when it was read.
	Time time.Time
	// CPUSeconds is the CPU time the replica's processes have used since it started
	// (cumulative: the forwarder turns two samples into cores).
	CPUSeconds float64
	// MemoryBytes is the memory in use (resident set, or the container's working set).
	MemoryBytes int64
	// MemoryLimitBytes is the replica's memory limit, 0 without one.
	MemoryLimitBytes int64
	// Node is where it runs, when the backend knows.
	Node string
	// GPUs are its GPUs' readings, when there are GPUs and they can be read.
	GPUs []GPUReading
}

// GPUReading is one GPU of a replica.
type GPUReading struct {
	Index            int
	UUID             string
	Utilization      float64 // percent, 0 to 100
	MemoryUsedBytes  int64
	MemoryTotalBytes int64
}
