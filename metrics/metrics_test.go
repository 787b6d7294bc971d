package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/metrics"
	"github.com/opendlc/opendlc/workflows"
)

// lister is a Temporal client whose ListWorkflow answers from executions, one page
// per call, or fails with err.
type lister struct {
	client.Client
	pages [][]*workflowpb.WorkflowExecutionInfo
	err   error
	calls int
}

func (l *lister) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	l.calls++
	if l.err != nil {
		return nil, l.err
	}
	i := 0
	if len(req.NextPageToken) > 0 {
		i = int(req.NextPageToken[0])
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: l.pages[i]}
	if i+1 < len(l.pages) {
		resp.NextPageToken = []byte{byte(i + 1)}
	}
	return resp, nil
}

func execution(t *testing.T, ws, phase string) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	fields := map[string]*commonpb.Payload{}
	for k, v := range map[string]string{workflows.SearchAttrWorkspace: ws, workflows.SearchAttrPhase: phase} {
		if v == "" {
			continue
		}
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		fields[k] = p
	}
	return &workflowpb.WorkflowExecutionInfo{SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}
}

func newJobsCollector(l *lister) *metrics.JobsCollector {
	return &metrics.JobsCollector{Client: l, Namespace: "default", Query: "q",
		WorkspaceAttr: workflows.SearchAttrWorkspace, PhaseAttr: workflows.SearchAttrPhase, MinInterval: time.Hour}
}

// The jobs gauge counts the open jobs of every page by workspace and phase, skips
// executions without the attributes, and reuses its figures within MinInterval.
func TestJobsCollectorCountsByWorkspaceAndPhase(t *testing.T) {
	l := &lister{pages: [][]*workflowpb.WorkflowExecutionInfo{
		{execution(t, "a", "Running"), execution(t, "a", "Running"), execution(t, "a", "Queued")},
		{execution(t, "b", "Running"), execution(t, "b", "")},
	}}
	c := newJobsCollector(l)
	want := `
# HELP opendlc_jobs Jobs whose workflow is open, by workspace and phase (from Temporal visibility at scrape time).
# TYPE opendlc_jobs gauge
opendlc_jobs{phase="Queued",workspace="a"} 1
opendlc_jobs{phase="Running",workspace="a"} 2
opendlc_jobs{phase="Running",workspace="b"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), metrics.Jobs); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), metrics.Jobs); err != nil {
		t.Fatal(err)
	}
	if l.calls != 2 {
		t.Fatalf("ListWorkflow calls = %d, want 2 (one listing of two pages, then the cached figures)", l.calls)
	}
}

// A listing that fails reports no jobs series and counts the error.
func TestJobsCollectorCountsErrors(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newJobsCollector(&lister{err: errors.New("visibility down")}))
	want := `
# HELP opendlc_jobs_scrape_errors_total Scrapes of opendlc_jobs that could not list the jobs.
# TYPE opendlc_jobs_scrape_errors_total counter
opendlc_jobs_scrape_errors_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), metrics.Jobs, metrics.JobsScrapeErrors); err != nil {
		t.Fatal(err)
	}
}

// every records one of each metric the Registry and the workflows record, so that
// every family is gathered.
func every(t *testing.T) *metrics.Registry {
	t.Helper()
	r, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	r.APIRequest("GET /v1/jobs", 200, time.Millisecond)
	r.Launch("local", time.Second, nil)
	r.LogLineForwarded(time.Now().Add(-time.Second), time.Now())
	r.JobPhase("ws", "Running")
	r.NotificationDelivery("webhook", nil)
	r.NotificationDeadLetter("webhook")
	h := r.TemporalHandler()
	h.WithTags(map[string]string{"failure_class": "Error"}).Counter(workflows.MetricJobRestarts).Inc(1)
	h.Timer(workflows.MetricJobRecovery).Record(time.Second)
	h.WithTags(map[string]string{"workspace": "ws"}).Timer(workflows.MetricAdmissionWait).Record(time.Second)
	jobs := newJobsCollector(&lister{pages: [][]*workflowpb.WorkflowExecutionInfo{{execution(t, "ws", "Running")}}})
	jobs.Workspaces = func(context.Context) ([]string, error) { return []string{"ws", "idle"}, nil }
	if err := r.Register(jobs); err != nil {
		t.Fatal(err)
	}
	return r
}

// gathered are the names of the families the registry gathers, with their types.
func gathered(t *testing.T, r *metrics.Registry) map[string]string {
	t.Helper()
	fams, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range fams {
		out[f.GetName()] = strings.ToLower(f.GetType().String())
	}
	return out
}

// The Registry's own metrics and the workflow-recorded ones come out under the names
// and types docs/metrics.md gives; the Temporal SDK's export adds _total to counters
// and _seconds to timers.
func TestRegistryNamesAndTypes(t *testing.T) {
	got := gathered(t, every(t))
	want := map[string]string{
		metrics.APIRequests: "counter", metrics.APIRequestDuration: "histogram",
		metrics.Launches: "counter", metrics.LaunchDuration: "histogram",
		metrics.LogLinesForwarded: "counter", metrics.LogForwardLag: "histogram",
		metrics.JobPhaseTransitions: "counter", metrics.NotificationDeliveries: "counter",
		metrics.NotificationDeadLetters: "counter", metrics.Jobs: "gauge", metrics.JobsScrapeErrors: "counter",
		metrics.Workspaces:                         "gauge",
		workflows.MetricJobRestarts + "_total":     "counter",
		workflows.MetricJobRecovery + "_seconds":   "histogram",
		workflows.MetricAdmissionWait + "_seconds": "histogram",
	}
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("%s: gathered as %q, want %s", name, got[name], typ)
		}
	}
}

// metricRE finds a metric name in backquotes in docs/metrics.md.
var metricRE = regexp.MustCompile("`((?:opendlc|temporal)_[a-z0-9_]+)`")

// documented are the metric names docs/metrics.md lists in backquotes.
func documented(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range metricRE.FindAllStringSubmatch(string(data), -1) {
		out = append(out, m[1])
	}
	return out
}

// dashboardMetrics are the metric families the dashboard's queries name (a histogram's
// _bucket, _sum and _count series name the histogram).
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "opendlc.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`\b(?:opendlc|temporal)_[a-z0-9_]+`)
	var out []string
	for _, v := range doc.Templating.List {
		for _, m := range name.FindAllString(v.Definition, -1) {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	for _, p := range doc.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				if base, ok := strings.CutSuffix(m, "_bucket"); ok {
					m = base
				}
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// Every metric the dashboard queries exists: OpenDLC's own are gathered from a
// registry that recorded each once, and the Temporal SDK's are listed in
// docs/metrics.md (the integration test checks a real worker serves them). Every
// OpenDLC metric is documented too.
func TestDashboardQueriesNameExistingMetrics(t *testing.T) {
	got := gathered(t, every(t))
	docs := documented(t)
	dash := dashboardMetrics(t)
	if len(dash) < 10 {
		t.Fatalf("the dashboard names %d metrics: %v", len(dash), dash)
	}
	for _, m := range dash {
		switch {
		case strings.HasPrefix(m, "opendlc_"):
			if got[m] == "" {
				t.Errorf("the dashboard queries %s, which OpenDLC does not record", m)
			}
		case !slices.Contains(docs, m):
			t.Errorf("the dashboard queries %s, which docs/metrics.md does not list", m)
		}
	}
	for name := range got {
		if strings.HasPrefix(name, "opendlc_") && !slices.Contains(docs, name) {
			t.Errorf("%s is not documented in docs/metrics.md", name)
		}
	}
}

// Every family a process serves passes promlint (help text, names, units), including
// the Temporal SDK's, which the SDK creates without a description, and a metric the
// help table does not know.
func TestEveryFamilyPassesPromlint(t *testing.T) {
	r := every(t)
	h := r.TemporalHandler()
	h.WithTags(map[string]string{"operation": "StartWorkflowExecution"}).Counter("temporal_request").Inc(1)
	h.Timer("temporal_request_latency").Record(time.Millisecond)
	h.Gauge("temporal_num_pollers").Update(2)
	h.Counter("temporal_metric_of_a_later_sdk").Inc(1)
	fams, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetHelp() == "" {
			t.Errorf("%s has no help text", f.GetName())
		}
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if len(fams) < 20 {
		t.Fatalf("gathered %d families, want the whole registry", len(fams))
	}
}

// A workspace with no open job is still listed (opendlc_workspaces), so the dashboard's
// workspace variable is not empty while nothing runs.
func TestJobsCollectorListsIdleWorkspaces(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := newJobsCollector(&lister{pages: [][]*workflowpb.WorkflowExecutionInfo{{}}})
	c.Workspaces = func(context.Context) ([]string, error) { return []string{"idle", "vision"}, nil }
	reg.MustRegister(c)
	want := `
# HELP opendlc_workspaces Workspaces in the registry, 1 each (a dashboard's list of workspaces, with or without open jobs).
# TYPE opendlc_workspaces gauge
opendlc_workspaces{workspace="idle"} 1
opendlc_workspaces{workspace="vision"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), metrics.Jobs, metrics.Workspaces); err != nil {
		t.Fatal(err)
	}
}
