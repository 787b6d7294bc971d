package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// A job that fails once and then succeeds, on a stack whose API process and `dlc
// worker` process both serve /metrics: while it runs the API's jobs gauge shows it
// Running; afterwards the worker's launch, log-line, phase, restart and recovery
// metrics and the Temporal SDK's worker metrics have moved, the API counted the
// submission by its route, and every metric the Grafana dashboard queries is served.
func TestMetricsEndpointsMoveWithAJob(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	dir := t.TempDir()
	e := itest.StartStack(t, ctx, embedded.Config{Dir: filepath.Join(dir, "stack"), NoWorker: true,
		WorkDir: env.dir, MetricsAddr: "127.0.0.1:0"})
	apiURL := e.Process.MetricsURL
	if apiURL == "" {
		t.Fatal("the API process serves no metrics")
	}
	workerURL := startMetricsWorker(t, ctx, e, filepath.Join(dir, "local"))
	c := itest.AdminClient(t, e)
	// The workspace is registered, as a team's is: the dashboard lists it by
	// opendlc_workspaces before, during and after its job.
	if _, err := c.CreateWorkspace(ctx, api.Workspace{Name: ws}); err != nil {
		t.Fatal(err)
	}
	pollMetric(t, ctx, apiURL, "opendlc_workspaces lists the registered workspace before any job", func(fams map[string]*dto.MetricFamily) bool {
		return sample(fams, "opendlc_workspaces", map[string]string{"workspace": ws}) == 1 &&
			len(matching(fams, "opendlc_jobs", map[string]string{"workspace": ws})) == 0
	})

	before := scrape(t, ctx, workerURL)
	if v := sample(before, "opendlc_launches_total", nil); v != 0 {
		t.Fatalf("launches before any job = %v, want 0", v)
	}
	// Attempt 0 prints 50 lines, then waits for the test's mark and fails with exit
	// code 3 (class Error); attempt 1 prints 50 lines and succeeds.
	mark := filepath.Join(dir, "fail-now")
	const name = "metered"
	itest.Submit(t, ctx, c, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  command: [sh, -c, 'for i in $(seq 1 50); do echo line $i; done; if [ "$DLC_ATTEMPT" = 0 ]; then while [ ! -e %s ]; do sleep 0.1; done; exit 3; fi']
  roles: {worker: {replicas: 1}}
  faultTolerance: {maxRestarts: 1}
  timeout: 3m
`, mark)))
	itest.WaitJob(t, ctx, c, ws, name, "attempt 0 running", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobRunning && j.Status.Attempt == 0
	})
	// The API's gauge counts the job as Running in its workspace while it runs.
	var apiRunning map[string]*dto.MetricFamily
	pollMetric(t, ctx, apiURL, "opendlc_jobs{phase=Running} of the workspace is 1", func(fams map[string]*dto.MetricFamily) bool {
		apiRunning = fams
		return sample(fams, "opendlc_jobs", map[string]string{"workspace": ws, "phase": "Running"}) == 1
	})
	running := scrape(t, ctx, workerURL)
	if v := sample(running, "opendlc_launches_total", map[string]string{"backend": "local", "result": "ok"}); v != 1 {
		t.Fatalf("launches while attempt 0 runs = %v, want 1", v)
	}

	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	job := waitTerminalOn(t, ctx, c, ws, name)
	if job.Status.Phase != schemas.JobSucceeded || job.Status.Restarts != 1 {
		t.Fatalf("job ended %s after %d restarts, want Succeeded after 1", job.Status.Phase, job.Status.Restarts)
	}
	// The fault really happened: attempt 0 failed with exit code 3, classed Error.
	if len(job.Status.Attempts) != 2 || job.Status.Attempts[0].Class != schemas.FailureError {
		t.Fatalf("attempts = %+v, want 2 with the first failed as Error", job.Status.Attempts)
	}

	// Worker: counters moved by what the job did. Log lines are counted once published,
	// which can trail the phase by a flush interval, and the workflow completes after
	// its last phase event: poll.
	ok := map[string]string{"backend": "local", "result": "ok"}
	var after map[string]*dto.MetricFamily
	pollMetric(t, ctx, workerURL, "100 log lines forwarded, the job's phases counted, its workflow completed", func(fams map[string]*dto.MetricFamily) bool {
		after = fams
		return sample(fams, "opendlc_log_lines_forwarded_total", nil) >= 100 &&
			sample(fams, "opendlc_job_phase_transitions_total", map[string]string{"workspace": ws, "phase": "Succeeded"}) == 1 &&
			sample(fams, "temporal_workflow_completed_total", map[string]string{"workflow_type": "TrainingJob"}) >= 1
	})
	checks := []struct {
		what   string
		got    float64
		wantGE float64
		wantLE float64
	}{
		{"launches ok", sample(after, "opendlc_launches_total", ok), 2, 2},
		{"launch latency observations", sampleCount(after, "opendlc_launch_duration_seconds", map[string]string{"backend": "local"}), 2, 2},
		{"log lines forwarded", sample(after, "opendlc_log_lines_forwarded_total", nil), 100, 1e9},
		{"log lag observations", sampleCount(after, "opendlc_log_forward_lag_seconds", nil), 100, 1e9},
		{"Running entered", sample(after, "opendlc_job_phase_transitions_total", map[string]string{"workspace": ws, "phase": "Running"}), 2, 2},
		{"Restarting entered", sample(after, "opendlc_job_phase_transitions_total", map[string]string{"workspace": ws, "phase": "Restarting"}), 1, 1},
		{"restarts of class Error", sample(after, "opendlc_job_restarts_total", map[string]string{"failure_class": "Error"}), 1, 1},
		{"recovery time observations", sampleCount(after, "opendlc_job_recovery_seconds", nil), 1, 1},
		{"SDK: activity executions timed", sampleCount(after, "temporal_activity_execution_latency_seconds", nil), 1, 1e9},
		{"SDK: workflow tasks timed", sampleCount(after, "temporal_workflow_task_execution_latency_seconds", nil), 1, 1e9},
		{"SDK: workflows completed", sample(after, "temporal_workflow_completed_total", nil), 1, 1e9},
	}
	for _, c := range checks {
		t.Logf("worker: %s = %v", c.what, c.got)
		if c.got < c.wantGE || c.got > c.wantLE {
			t.Errorf("worker: %s = %v, want %v..%v", c.what, c.got, c.wantGE, c.wantLE)
		}
	}
	lagSum := sampleSum(after, "opendlc_log_forward_lag_seconds", nil)
	recovery := sampleSum(after, "opendlc_job_recovery_seconds", nil)
	t.Logf("worker: mean log lag %.3fs, recovery %.3fs", lagSum/sampleCount(after, "opendlc_log_forward_lag_seconds", nil), recovery)
	if recovery <= 0 {
		t.Errorf("recovery time = %v, want > 0", recovery)
	}

	// API: the submission counted under its route pattern, the Temporal client's
	// requests counted, and the job no longer counted once it ended.
	var apiFams map[string]*dto.MetricFamily
	pollMetric(t, ctx, apiURL, "the ended job leaves opendlc_jobs", func(fams map[string]*dto.MetricFamily) bool {
		apiFams = fams
		return sample(fams, "opendlc_jobs", map[string]string{"workspace": ws}) == 0
	})
	if v := sample(apiFams, "opendlc_api_requests_total", map[string]string{"route": "POST /v1/jobs", "code": "201"}); v != 1 {
		t.Errorf(`api: opendlc_api_requests_total{route="POST /v1/jobs",code="201"} = %v, want 1`, v)
	}
	polls := sample(apiFams, "opendlc_api_requests_total", map[string]string{"route": "GET /v1/workspaces/{ws}/jobs/{name}", "code": "200"})
	t.Logf("api: %v job reads counted under GET /v1/workspaces/{ws}/jobs/{name}", polls)
	if polls < 2 {
		t.Errorf("api: job reads = %v, want >= 2 (the test polled the job)", polls)
	}
	for _, f := range apiFams["opendlc_api_requests_total"].GetMetric() {
		if r := labelOf(f, "route"); strings.Contains(r, ws) || strings.Contains(r, name) {
			t.Errorf("api: route label %q holds a raw path", r)
		}
	}
	if v := sample(apiFams, "temporal_request_total", nil); v < 1 {
		t.Errorf("api: temporal_request_total = %v, want >= 1", v)
	}

	// Every metric the dashboard queries is served by one of the two processes (the jobs
	// gauge while a job is open), except those this job has no occasion to record
	// (notifications, quota admission, and the SDK's activity schedule-to-start latency,
	// which it records only for an activity dispatched through matching: with eager
	// activities, as the stack runs Temporal, only a retry or a saturated worker's).
	notExercised := map[string]bool{
		"opendlc_notification_deliveries_total": true, "opendlc_notification_dead_letters_total": true,
		"opendlc_admission_wait_seconds": true, "temporal_activity_schedule_to_start_latency_seconds": true,
	}
	for _, m := range dashboardMetrics(t) {
		if notExercised[m] {
			continue
		}
		if after[m] == nil && apiFams[m] == nil && apiRunning[m] == nil {
			t.Errorf("the dashboard queries %s, which neither endpoint serves", m)
		}
	}
	// The dashboard's workspace variable lists the job's workspace after the job ended.
	if v := sample(apiFams, "opendlc_workspaces", map[string]string{"workspace": ws}); v != 1 {
		t.Errorf("api: opendlc_workspaces{workspace=%q} = %v after the job ended, want 1", ws, v)
	}
	// Everything both processes serve, the Temporal SDK's families included, has help
	// text and passes promlint.
	for _, ep := range []struct {
		name string
		fams map[string]*dto.MetricFamily
	}{{"worker", after}, {"api", apiFams}} {
		list := make([]*dto.MetricFamily, 0, len(ep.fams))
		for _, f := range ep.fams {
			if f.GetHelp() == "" {
				t.Errorf("%s: %s has no help text", ep.name, f.GetName())
			}
			list = append(list, f)
		}
		problems, err := promlint.NewWithMetricFamilies(list).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: promlint: %s: %s", ep.name, p.Metric, p.Text)
		}
		t.Logf("%s: %d families pass promlint", ep.name, len(list))
	}
}

// startMetricsWorker starts `dlc worker --metrics-addr 127.0.0.1:0` on e and returns
// the metrics URL it prints.
func startMetricsWorker(t *testing.T, ctx context.Context, e *embedded.Embedded, stateDir string) string {
	t.Helper()
	bin := dlcBinary(t)
	cmd := exec.Command(bin, itest.WorkerArgs(e, "--state-dir", stateDir, "--workdir", env.dir,
		"--metrics-addr", "127.0.0.1:0")...)
	cmd.Env = itest.WorkerEnv(e)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{cmd: cmd}
	t.Cleanup(w.kill)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "metrics on "); ok {
				urls <- u
			}
		}
	}()
	select {
	case u := <-urls:
		return u
	case <-ctx.Done():
		t.Fatal("the worker never printed its metrics URL")
		return ""
	}
}

// waitTerminalOn waits for a job of the stack c serves to reach a terminal phase.
func waitTerminalOn(t *testing.T, ctx context.Context, c interface {
	GetJob(context.Context, string, string) (*api.Job, error)
}, ws, name string) *api.Job {
	t.Helper()
	var j *api.Job
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("job %s/%s to end", ws, name), func() error {
		var err error
		if j, err = c.GetJob(ctx, ws, name); err != nil {
			return err
		}
		if !j.Status.Phase.Terminal() {
			return fmt.Errorf("phase %s", j.Status.Phase)
		}
		return nil
	}, itest.PollInterval)
	return j
}

// scrape reads a /metrics endpoint in the Prometheus text format.
func scrape(t *testing.T, ctx context.Context, url string) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := tryScrape(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func tryScrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		return nil, fmt.Errorf("GET %s: Content-Type %q, want the text format", url, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// pollMetric scrapes url until cond holds.
func pollMetric(t *testing.T, ctx context.Context, url, what string, cond func(map[string]*dto.MetricFamily) bool) {
	t.Helper()
	testutil.Eventually(t, itest.Left(ctx), what+" on "+url, func() error {
		fams, err := tryScrape(ctx, url)
		if err != nil {
			return err
		}
		if !cond(fams) {
			return errors.New("not in the metrics scraped")
		}
		return nil
	}, 200*time.Millisecond)
}

// sample sums the values (counter, gauge, untyped) of the series of a family whose
// labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range matching(fams, name, want) {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// sampleCount sums the observation counts of a histogram's matching series.
func sampleCount(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var n float64
	for _, m := range matching(fams, name, want) {
		n += float64(m.GetHistogram().GetSampleCount())
	}
	return n
}

// sampleSum sums the observed values of a histogram's matching series.
func sampleSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var s float64
	for _, m := range matching(fams, name, want) {
		s += m.GetHistogram().GetSampleSum()
	}
	return s
}

func matching(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		ok := true
		for k, v := range want {
			if labelOf(m, k) != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// dashboardMetrics are the metric families the Grafana dashboard's queries name
// (histogram series _bucket, _sum and _count name their histogram).
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(itest.Root(), "deploy", "grafana", "opendlc.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	name := regexp.MustCompile(`\b(?:opendlc|temporal)_[a-z0-9_]+`)
	for _, p := range doc.Panels {
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(m, suffix); ok && strings.HasSuffix(base, "_seconds") {
						m = base
					}
				}
				if !seen[m] {
					seen[m] = true
					out = append(out, m)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the dashboard queries no metric")
	}
	return out
}
