package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/opendlc/opendlc/metrics"
	"github.com/opendlc/opendlc/workflows"
)

// MetricsConfig is where a process serves its metrics: plain HTTP, no authentication,
// on a listener of its own (not the API's port), so that the API's tokens never guard
// a scrape and the metrics port can stay inside the cluster network.
type MetricsConfig struct {
	// Listener is where the metrics are served. When nil, Start listens on Addr.
	Listener net.Listener
	// Addr is the listen address when Listener is nil (":9090", "127.0.0.1:0").
	Addr string
}

// MetricsPath is the path of the metrics on the metrics listener.
const MetricsPath = "/metrics"

// openJobsQuery selects the job workflows that are open, for the opendlc_jobs gauge.
var openJobsQuery = fmt.Sprintf("%s = %q AND ExecutionStatus = 'Running'",
	workflows.SearchAttrKind, workflows.TrainingJobWorkflowName)

// startMetrics adds the jobs gauge to a process that serves the API, then serves the
// registry when cfg.Metrics is set.
func (p *Process) startMetrics(cfg Config) error {
	if cfg.API != nil {
		jobs := &metrics.JobsCollector{
			Client: p.Temporal, Namespace: cfg.Namespace, Query: openJobsQuery,
			WorkspaceAttr: workflows.SearchAttrWorkspace, PhaseAttr: workflows.SearchAttrPhase,
		}
		if p.Auth != nil {
			jobs.Workspaces = p.workspaceNames
		}
		if err := p.Metrics.Register(jobs); err != nil {
			return err
		}
	}
	if cfg.Metrics == nil {
		return nil
	}
	ln := cfg.Metrics.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Metrics.Addr); err != nil {
			return fmt.Errorf("app: metrics: listen on %s: %w", cfg.Metrics.Addr, err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, p.Metrics.Handler())
	p.addHealth(mux) // health.go: the probes of a process without the API
	p.metricsHTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	p.MetricsURL = "http://" + ln.Addr().String() + MetricsPath
	srv := p.metricsHTTP
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case p.serveErr <- fmt.Errorf("app: metrics: %w", err):
			default: // the API's error is there already
			}
		}
	}()
	return nil
}

// workspaceNames lists the names of the registry's workspaces (opendlc_workspaces).
func (p *Process) workspaceNames(ctx context.Context) ([]string, error) {
	wss, err := p.Auth.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(wss))
	for i, ws := range wss {
		names[i] = ws.Name
	}
	return names, nil
}
