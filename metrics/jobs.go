package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// JobsCollector is the opendlc_jobs gauge: the jobs whose workflow is open, by
// workspace and phase, counted from Temporal's visibility store (the search attributes
// every job workflow keeps up to date) when Prometheus scrapes. Several processes may
// collect it; they report the same figures. A scrape reuses figures younger than
// MinInterval, so that many scrapers cost one listing.
type JobsCollector struct {
	// Client lists the workflows; Namespace is theirs.
	Client    client.Client
	Namespace string
	// Query selects the open job workflows (visibility query language).
	Query string
	// WorkspaceAttr and PhaseAttr name the keyword search attributes that hold a job's
	// workspace and phase.
	WorkspaceAttr, PhaseAttr string
	// Workspaces, when set, lists the workspaces of the registry: each is reported as
	// opendlc_workspaces{workspace} 1, so that a dashboard lists a workspace while it
	// has no open job (opendlc_jobs has no series for it then).
	Workspaces func(ctx context.Context) ([]string, error)
	// MinInterval is how long figures are reused; default 5 s.
	MinInterval time.Duration
	// Timeout bounds one listing; default 5 s.
	Timeout time.Duration

	mu     sync.Mutex
	at     time.Time
	counts map[[2]string]int
	wss    []string
	errs   prometheus.Counter
	once   sync.Once
}

var jobsDesc = prometheus.NewDesc(Jobs,
	"Jobs whose workflow is open, by workspace and phase (from Temporal visibility at scrape time).",
	[]string{"workspace", "phase"}, nil)

var workspacesDesc = prometheus.NewDesc(Workspaces,
	"Workspaces in the registry, 1 each (a dashboard's list of workspaces, with or without open jobs).",
	[]string{"workspace"}, nil)

func (c *JobsCollector) init() {
	c.once.Do(func() {
		c.errs = prometheus.NewCounter(prometheus.CounterOpts{
			Name: JobsScrapeErrors, Help: "Scrapes of opendlc_jobs that could not list the jobs.",
		})
	})
}

// Describe implements prometheus.Collector.
func (c *JobsCollector) Describe(ch chan<- *prometheus.Desc) {
	c.init()
	ch <- jobsDesc
	if c.Workspaces != nil {
		ch <- workspacesDesc
	}
	c.errs.Describe(ch)
}

// Collect implements prometheus.Collector. When the listing fails, it reports no
// opendlc_jobs series and counts the error.
func (c *JobsCollector) Collect(ch chan<- prometheus.Metric) {
	c.init()
	counts, wss, err := c.figures()
	if err != nil {
		c.errs.Inc()
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for _, ws := range wss {
		ch <- prometheus.MustNewConstMetric(workspacesDesc, prometheus.GaugeValue, 1, ws)
	}
	c.errs.Collect(ch)
}

// figures returns the cached counts and workspaces, or lists them again when they are
// stale.
func (c *JobsCollector) figures() (map[[2]string]int, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	minInterval := c.MinInterval
	if minInterval <= 0 {
		minInterval = 5 * time.Second
	}
	if c.counts != nil && time.Since(c.at) < minInterval {
		return c.counts, c.wss, nil
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	counts, err := c.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	var wss []string
	if c.Workspaces != nil {
		if wss, err = c.Workspaces(ctx); err != nil {
			return nil, nil, err
		}
	}
	c.counts, c.wss, c.at = counts, wss, time.Now()
	return counts, wss, nil
}

// list pages through the open jobs and counts them by workspace and phase.
func (c *JobsCollector) list(ctx context.Context) (map[[2]string]int, error) {
	counts := map[[2]string]int{}
	var token []byte
	for {
		resp, err := c.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.Namespace, PageSize: 1000, NextPageToken: token, Query: c.Query,
		})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Executions {
			attrs := e.GetSearchAttributes().GetIndexedFields()
			ws, phase := keyword(attrs[c.WorkspaceAttr]), keyword(attrs[c.PhaseAttr])
			if ws == "" || phase == "" {
				continue
			}
			counts[[2]string{ws, phase}]++
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return counts, nil
		}
	}
}

// keyword decodes a keyword search attribute ("" when absent or not a string).
func keyword(p *commonpb.Payload) string {
	if p == nil {
		return ""
	}
	var s string
	if converter.GetDefaultDataConverter().FromPayload(p, &s) != nil {
		return ""
	}
	return s
}
