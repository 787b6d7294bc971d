package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// Resource sampling (docs/metrics.md, "Resource use"): while ForwardLogs runs, a
// backend that is a backend.ResourceSampler is asked what each running replica uses
// every ResourceInterval; each sample is published as an events.TypeJobResources event
// and summed into the attempt's schemas.ResourceUse, which ForwardLogs returns.

// DefaultResourceInterval is how often a replica's resources are sampled by default.
const DefaultResourceInterval = 10 * time.Second

// MinResourceInterval is the shortest sampling interval.
const MinResourceInterval = time.Second

func (a *JobActivities) resourceInterval() time.Duration {
	switch {
	case a.ResourceInterval < 0:
		return 0
	case a.ResourceInterval == 0:
		return DefaultResourceInterval
	default:
		return max(a.ResourceInterval, MinResourceInterval)
	}
}

// resourceAcc sums one replica's samples. It is carried in the forwarder's heartbeat,
// so a forwarder retried after a worker restart goes on from it.
type resourceAcc struct {
	Samples    int     `json:"samples"`
	CPUSum     float64 `json:"cpuSum"`
	PeakCPU    float64 `json:"peakCPU"`
	PeakMem    int64   `json:"peakMem"`
	Limit      int64   `json:"limit,omitempty"`
	GPUSamples int     `json:"gpuSamples,omitempty"`
	GPUUtilSum float64 `json:"gpuUtilSum,omitempty"`
	PeakGPUMem int64   `json:"peakGPUMem,omitempty"`
	// LastCPU and LastTime are the previous sample's cumulative CPU seconds and time.
	LastCPU  float64   `json:"lastCPU"`
	LastTime time.Time `json:"lastTime"`
	// LastBucket is the previous sample's time bucket (the event's seq).
	LastBucket int64 `json:"lastBucket"`
}

// forwardHeartbeat is ForwardLogs' heartbeat: the last record forwarded per replica,
// and the resource sums per replica.
type forwardHeartbeat struct {
	Progress  map[string]int64        `json:"progress"`
	Resources map[string]*resourceAcc `json:"resources,omitempty"`
}

// resourceRecorder samples an attempt's replicas.
type resourceRecorder struct {
	a        *JobActivities
	in       ForwardLogsInput
	sampler  backend.ResourceSampler
	interval time.Duration

	mu   sync.Mutex
	accs map[string]*resourceAcc
}

// newResourceRecorder returns a recorder for the attempt, with the sums a previous
// try of the activity heartbeated; nil when the backend cannot sample or sampling is
// off.
func (a *JobActivities) newResourceRecorder(ctx context.Context, in ForwardLogsInput) *resourceRecorder {
	sampler, ok := a.Backend.(backend.ResourceSampler)
	interval := a.resourceInterval()
	if !ok || interval == 0 {
		return nil
	}
	r := &resourceRecorder{a: a, in: in, sampler: sampler, interval: interval, accs: map[string]*resourceAcc{}}
	if activity.HasHeartbeatDetails(ctx) {
		var hb forwardHeartbeat
		if activity.GetHeartbeatDetails(ctx, &hb) == nil {
			for name, acc := range hb.Resources {
				if acc != nil {
					r.accs[name] = acc
				}
			}
		}
	}
	return r
}

// run samples every replica each interval until ctx ends.
func (r *resourceRecorder) run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, rep := range r.in.Replicas {
			err := r.sample(ctx, rep.Name)
			switch {
			case errors.Is(err, errors.ErrUnsupported):
				return // this backend, as configured, cannot sample
			case err != nil && ctx.Err() == nil && !errors.Is(err, backend.ErrNotRunning):
				warn(ctx, "resource sample not taken", "job", r.in.Ref.Job, "replica", rep.Name, "error", err)
			}
		}
	}
}

// sample reads and publishes one replica's sample, at most one per time bucket (the
// sample time in Unix seconds over the interval), which is the event's seq and in its
// id: a sampler retried within a bucket publishes nothing twice.
func (r *resourceRecorder) sample(ctx context.Context, replica string) error {
	s, err := r.sampler.SampleResources(ctx, r.in.Ref, replica)
	if err != nil {
		return err
	}
	bucket := s.Time.UnixNano() / int64(r.interval)
	r.mu.Lock()
	acc := r.accs[replica]
	if acc == nil {
		acc = &resourceAcc{}
		r.accs[replica] = acc
	}
	if bucket <= acc.LastBucket {
		r.mu.Unlock()
		return nil
	}
	var cores float64
	if !acc.LastTime.IsZero() && s.Time.After(acc.LastTime) && s.CPUSeconds >= acc.LastCPU {
		cores = (s.CPUSeconds - acc.LastCPU) / s.Time.Sub(acc.LastTime).Seconds()
	}
	first := acc.LastTime.IsZero()
	acc.LastCPU, acc.LastTime, acc.LastBucket = s.CPUSeconds, s.Time, bucket
	data := events.ResourceData{Job: r.in.Ref.Job, UID: r.in.UID, Attempt: r.in.Ref.Attempt, Replica: replica,
		Node: s.Node, Seq: bucket, CPU: cores, MemoryBytes: s.MemoryBytes, MemoryLimitBytes: s.MemoryLimitBytes}
	for _, g := range s.GPUs {
		data.GPUs = append(data.GPUs, events.GPUSample{Index: g.Index, UUID: g.UUID, Utilization: g.Utilization,
			MemoryUsedBytes: g.MemoryUsedBytes, MemoryTotalBytes: g.MemoryTotalBytes})
	}
	if !first {
		// The first reading has no previous one to measure CPU against: it starts the
		// clock and is not published.
		acc.add(data)
	}
	r.mu.Unlock()
	if first {
		return nil
	}
	id := fmt.Sprintf("%s:a%d:%s:r%d", r.in.UID, r.in.Ref.Attempt, replica, bucket)
	ev, err := events.New(id, events.TypeJobResources, r.in.Ref.Workspace,
		events.JobSource(r.in.Ref.Workspace, r.in.Ref.Job), r.in.Ref.Job, s.Time, data)
	if err != nil {
		return err
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return r.a.Publisher.Publish(ctx, events.Msg{Subject: events.JobResourcesSubject(r.in.Ref.Workspace, r.in.Ref.Job), ID: id, Data: b})
}

// add sums a published sample.
func (acc *resourceAcc) add(d events.ResourceData) {
	acc.Samples++
	acc.CPUSum += d.CPU
	acc.PeakCPU = max(acc.PeakCPU, d.CPU)
	acc.PeakMem = max(acc.PeakMem, d.MemoryBytes)
	acc.Limit = max(acc.Limit, d.MemoryLimitBytes)
	if len(d.GPUs) > 0 {
		acc.GPUSamples++
		var util float64
		for _, g := range d.GPUs {
			util += g.Utilization
			acc.PeakGPUMem = max(acc.PeakGPUMem, g.MemoryUsedBytes)
		}
		acc.GPUUtilSum += util / float64(len(d.GPUs))
	}
}

// heartbeat is a copy of the sums, for the forwarder's heartbeat.
func (r *resourceRecorder) heartbeat() map[string]*resourceAcc {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*resourceAcc, len(r.accs))
	for k, v := range r.accs {
		c := *v
		out[k] = &c
	}
	return out
}

// use is the attempt's summary; nil without any sample.
func (r *resourceRecorder) use() *schemas.ResourceUse {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var all resourceAcc
	var replicas []schemas.ResourceUse
	for _, name := range slices.Sorted(maps.Keys(r.accs)) {
		if acc := r.accs[name]; acc.Samples > 0 {
			replicas = append(replicas, acc.summary(name))
			all.merge(acc)
		}
	}
	if all.Samples == 0 {
		return nil
	}
	sum := all.summary("")
	sum.Replicas = replicas
	return &sum
}

// merge adds another replica's sums: counts and sums add, peaks take the higher.
func (acc *resourceAcc) merge(o *resourceAcc) {
	acc.Samples += o.Samples
	acc.CPUSum += o.CPUSum
	acc.PeakCPU = max(acc.PeakCPU, o.PeakCPU)
	acc.PeakMem = max(acc.PeakMem, o.PeakMem)
	acc.Limit = max(acc.Limit, o.Limit)
	acc.GPUSamples += o.GPUSamples
	acc.GPUUtilSum += o.GPUUtilSum
	acc.PeakGPUMem = max(acc.PeakGPUMem, o.PeakGPUMem)
}

func (acc *resourceAcc) summary(replica string) schemas.ResourceUse {
	u := schemas.ResourceUse{Replica: replica, Samples: acc.Samples, PeakCPU: acc.PeakCPU,
		PeakMemoryBytes: acc.PeakMem, MemoryLimitBytes: acc.Limit, GPUSamples: acc.GPUSamples, PeakGPUMemoryBytes: acc.PeakGPUMem}
	if acc.Samples > 0 {
		u.MeanCPU = acc.CPUSum / float64(acc.Samples)
	}
	if acc.GPUSamples > 0 {
		u.MeanGPUUtilization = acc.GPUUtilSum / float64(acc.GPUSamples)
	}
	return u
}
