package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/opendlc/opendlc/backend"
)

// GPUs of a replica on Kubernetes, with WithDCGMExporter: NVIDIA's DCGM exporter, run as
// a DaemonSet on the GPU nodes (alone or by the GPU Operator) with its Kubernetes
// mapping on (DCGM_EXPORTER_KUBERNETES, the default of its Helm chart), labels each
// GPU's metrics with the pod, namespace and container that hold the GPU. A sample reads
// the exporter of the replica's node, http://HOST_IP:PORT/metrics, and takes the GPUs
// labelled with the replica's pod: DCGM_FI_DEV_GPU_UTIL (percent) and DCGM_FI_DEV_FB_USED
// and DCGM_FI_DEV_FB_FREE (MiB of frame buffer). One read per node serves its pods'
// samples for a second.

// WithDCGMExporter reads replicas' GPUs from the DCGM exporter listening on port on
// every GPU node (9400 is its default); 0 reads none.
func WithDCGMExporter(port int) Option {
	return func(b *Backend) error {
		if port < 0 || port > 65535 {
			return fmt.Errorf("kube: DCGM exporter port %d: want 1 to 65535 (0: none)", port)
		}
		b.dcgmPort = port
		return nil
	}
}

// The DCGM fields a sample reads.
const (
	dcgmUtil   = "DCGM_FI_DEV_GPU_UTIL"
	dcgmFBUsed = "DCGM_FI_DEV_FB_USED"
	dcgmFBFree = "DCGM_FI_DEV_FB_FREE"
)

// dcgmGPU is one GPU as the exporter labels it, with the pod holding it.
type dcgmGPU struct {
	namespace, pod string
	reading        backend.GPUReading
}

// parseDCGM reads a DCGM exporter's /metrics (the Prometheus text format) into the GPUs
// held by pods: a GPU without pod labels (no workload on it) is left out.
func parseDCGM(text io.Reader) ([]dcgmGPU, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(text)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*dcgmGPU{}
	var order []string
	for _, name := range []string{dcgmUtil, dcgmFBUsed, dcgmFBFree} {
		f := fams[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			ns, pod := labels["namespace"], labels["pod"]
			if ns == "" || pod == "" || m.GetGauge() == nil {
				continue
			}
			idx, err := strconv.Atoi(labels["gpu"])
			if err != nil {
				continue
			}
			key := ns + "/" + pod + "/" + labels["UUID"] + "/" + labels["gpu"]
			g := byKey[key]
			if g == nil {
				g = &dcgmGPU{namespace: ns, pod: pod, reading: backend.GPUReading{Index: idx, UUID: labels["UUID"]}}
				byKey[key] = g
				order = append(order, key)
			}
			v := m.GetGauge().GetValue()
			switch name {
			case dcgmUtil:
				g.reading.Utilization = v
			case dcgmFBUsed:
				g.reading.MemoryUsedBytes = int64(v * (1 << 20))
				g.reading.MemoryTotalBytes += int64(v * (1 << 20))
			case dcgmFBFree:
				g.reading.MemoryTotalBytes += int64(v * (1 << 20))
			}
		}
	}
	out := make([]dcgmGPU, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out, nil
}

// podGPUs are the GPUs the DCGM exporter on hostIP gives the pod ns/name; none without
// an exporter port.
func (b *Backend) podGPUs(ctx context.Context, hostIP, ns, name string) ([]backend.GPUReading, error) {
	if b.dcgmPort == 0 || hostIP == "" {
		return nil, nil
	}
	gpus, err := b.dcgmOf(ctx, hostIP)
	if err != nil {
		return nil, err
	}
	var out []backend.GPUReading
	for _, g := range gpus {
		if g.namespace == ns && g.pod == name {
			out = append(out, g.reading)
		}
	}
	return out, nil
}

// dcgmOf is the exporter's reading of a node, at most nodeStatsMaxAge old.
func (b *Backend) dcgmOf(ctx context.Context, hostIP string) ([]dcgmGPU, error) {
	return b.gpus.get(hostIP, func() ([]dcgmGPU, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		u := "http://" + net.JoinHostPort(hostIP, strconv.Itoa(b.dcgmPort)) + "/metrics"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("kube: the DCGM exporter %s: %w", u, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("kube: the DCGM exporter %s: %s", u, resp.Status)
		}
		// An exporter's page is a few hundred KiB per node; more is not read.
		gpus, err := parseDCGM(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return nil, fmt.Errorf("kube: the DCGM exporter %s: %w", u, err)
		}
		return gpus, nil
	})
}
