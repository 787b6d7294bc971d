package kube

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
)

// A DCGM exporter's /metrics in the exporter's format (testdata/dcgm-exporter.txt:
// HELP and TYPE lines, the labels it writes, a GPU without a workload, another
// namespace's pod), served on loopback as a node's exporter: the replica's pod gets its
// two GPUs with utilization and frame buffer, another pod's and the idle GPU stay out.
func TestPodGPUsFromTheDCGMExporter(t *testing.T) {
	text, err := os.ReadFile("testdata/dcgm-exporter.txt")
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		reads++
		_, _ = w.Write(text)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{}
	if err := WithDCGMExporter(p)(b); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := b.podGPUs(ctx, host, "team-a", "train-worker-0-a0")
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.GPUReading{
		{Index: 0, UUID: "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52", Utilization: 97, MemoryUsedBytes: 61440 << 20, MemoryTotalBytes: (61440 + 20119) << 20},
		{Index: 1, UUID: "GPU-1b7e4f2a-63c0-4d8e-9f57-0a4c2d9e8b13", Utilization: 89, MemoryUsedBytes: 60012 << 20, MemoryTotalBytes: (60012 + 21547) << 20},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the replica's GPUs (-want +got):\n%s", diff)
	}
	// The other pod's, read from the same reading of the node (one read a second).
	other, err := b.podGPUs(ctx, host, "team-b", "eval-worker-0-a0")
	if err != nil || len(other) != 1 || other[0].Index != 2 || other[0].Utilization != 12 {
		t.Errorf("team-b's pod: %+v, %v", other, err)
	}
	if reads != 1 {
		t.Errorf("the exporter was read %d times for two pods of one node within a second, want once", reads)
	}
	none, err := b.podGPUs(ctx, host, "team-a", "no-such-pod")
	if err != nil || len(none) != 0 {
		t.Errorf("a pod without GPUs: %+v, %v", none, err)
	}
	if err := WithDCGMExporter(70000)(b); err == nil {
		t.Error("port 70000 accepted")
	}
}
