package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// browser starts headless Chromium (Debian's chromium package, which `task deps`
// installs) for one test; the test fails, never skips, when it is missing.
func browser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (task deps installs it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 1000), chromedp.UserDataDir(t.TempDir()))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// page drives one browser tab, failing the test (with a screenshot) on error.
type page struct {
	t   *testing.T
	ctx context.Context
	// shots is where screenshots go: $DLC_CONSOLE_SCREENSHOTS, else a temporary dir.
	shots string
}

func newPage(t *testing.T, ctx context.Context) *page {
	shots := os.Getenv("DLC_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	return &page{t: t, ctx: browser(t, ctx), shots: shots}
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.screenshot("failed")
		p.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) and returns its value.
func eval[T any](p *page, what, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitJS polls a JavaScript predicate until it holds, for at most a minute.
func (p *page) waitJS(what, predicate string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		p.screenshot("failed")
		p.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (p *page) location() string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Location())
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// waitRows opens the jobs page of ws with query until it lists exactly the jobs named
// (the list comes from Temporal's visibility store, which may lag a moment), for at
// most a minute.
func (p *page) waitRows(ws, query string, want ...string) {
	p.t.Helper()
	testutil.Eventually(p.t, time.Minute, fmt.Sprintf("jobs page ?%s to list %v", query, want), func() error {
		p.do("open the jobs page", chromedp.Navigate(env.e.APIURL+"/ui/ws/"+ws+"/jobs?"+query), chromedp.WaitVisible(chromedp.CSS("#jobs")))
		got := eval[[]string](p, "rows", `Array.from(document.querySelectorAll('#job-rows tr[data-job]')).map(r => r.dataset.job)`)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("it lists %v", got)
		}
		return nil
	}, 200*time.Millisecond)
}

// screenshot writes the page's screenshot as NAME.png.
func (p *page) screenshot(name string) {
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(p.shots, "console-"+name+".png")
	if err := os.WriteFile(file, buf, 0o644); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p.t.Logf("screenshot: %s", file)
}

// signIn signs in on the console with an API token.
func (p *page) signIn(token string) {
	p.t.Helper()
	p.do("sign in",
		chromedp.Navigate(env.e.APIURL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#who")))
}

// createToken creates a token of role in ws and returns its secret.
func createToken(t *testing.T, ctx context.Context, name, ws string, role api.Role) string {
	t.Helper()
	tok, err := env.api.CreateToken(ctx, api.TokenRequest{Name: name, Workspace: ws, Role: role, TTL: schemas.Duration(time.Hour)})
	if err != nil {
		t.Fatalf("create token %s: %v", name, err)
	}
	t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), name) })
	return tok.Secret
}

// memberClient makes sure workspace ws exists and returns a member token of it (revoked
// when the test ends) and an API client with that token.
func memberClient(t *testing.T, ctx context.Context, ws string) (string, *dlc.Client) {
	t.Helper()
	ensureWorkspace(t, ctx, ws)
	tok := createToken(t, ctx, ws+"-member", ws, api.RoleMember)
	c, err := dlc.New(env.e.APIURL, dlc.WithToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	return tok, c
}

// twoMembers makes the test's workspace A and a workspace B beside it, and a member
// token of each (revoked when the test ends).
func twoMembers(t *testing.T, ctx context.Context) (wsA, wsB, tokA, tokB string) {
	t.Helper()
	wsA = workspace(t)
	wsB = wsA + "-b"
	ensureWorkspace(t, ctx, wsA)
	ensureWorkspace(t, ctx, wsB)
	return wsA, wsB, createToken(t, ctx, wsA+"-member", wsA, api.RoleMember), createToken(t, ctx, wsB+"-member", wsB, api.RoleMember)
}

// consoleJob prints numbered lines and a falling loss for about n/2 seconds, then
// waits for the stop file or the end.
func consoleJob(ws, name string, n int) string {
	return itest.ShellJob(ws, name, fmt.Sprintf(
		`i=1; while [ $i -le %d ]; do echo "console line $i"; echo "dlc:metric step=$i loss=$((100 / i)).5"; i=$((i+1)); sleep 0.5; done`, n))
}

// TestConsoleInChromium drives the web console in headless Chromium against the whole
// stack: sign in with a token (the session cookie is HttpOnly and SameSite=Strict), a
// job submitted meanwhile appears on the jobs page without a reload (server-sent
// events), its page streams its log lines and draws its loss chart as it reports, and
// charts of its replica's CPU and memory from the resource samples,
// the Stop button stops it; a POST without the CSRF token is refused and changes
// nothing, and a token of another workspace sees none of the first workspace's jobs,
// neither listed nor by URL, and cannot stop them.
func TestConsoleInChromium(t *testing.T) {
	ctx := itest.Context(t, 5*time.Minute)
	wsA, wsB, tokA, tokB := twoMembers(t, ctx)
	apiA, err := dlc.New(env.e.APIURL, dlc.WithToken(tokA))
	if err != nil {
		t.Fatal(err)
	}

	p := newPage(t, ctx)
	p.signIn(tokA)
	if loc := p.location(); !strings.HasSuffix(loc, "/ui/ws/"+wsA+"/jobs") {
		t.Fatalf("after sign-in the browser is at %s, want the jobs of %s", loc, wsA)
	}
	cookies, err := chromedp.Call(p.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "dlc_session" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Secure || session.Path != "/ui/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure without TLS, path /ui/", session)
	}
	if strings.Contains(session.Value, tokA) || len(session.Value) < 40 {
		t.Fatalf("the session cookie must be a random id, not the token")
	}

	// A job submitted while the page is open appears without a reload, then runs.
	p.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__notReloaded = true`))
	job := "console-live"
	itest.Submit(t, ctx, apiA, consoleJob(wsA, job, 60))
	p.waitJS("the new job's row", fmt.Sprintf(`!!document.querySelector('tr[data-job=%q]')`, job))
	p.waitJS("the job to run", fmt.Sprintf(`!!document.querySelector('tr[data-job=%q][data-phase="Running"]')`, job))
	if !eval[bool](p, "check the page was not reloaded", `window.__notReloaded === true`) {
		t.Fatal("the jobs page reloaded: the row must come from the live update")
	}
	if fw := p.text(fmt.Sprintf(`tr[data-job=%q] td:nth-child(3)`, job)); fw != "custom" {
		t.Fatalf("framework column %q, want custom", fw)
	}
	p.screenshot("jobs")

	// Its page streams the log lines and draws the loss chart as the job reports.
	p.do("open the job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-job=%q] a`, job))),
		chromedp.WaitVisible(chromedp.CSS("#log")))
	p.waitJS("log lines to stream", `Array.from(document.querySelectorAll('#log .line')).some(l => l.textContent.includes('console line 6'))`)
	p.waitJS("a loss chart with several points", `(() => { const s = document.querySelector('#charts svg#metric-loss'); return !!s && Number(s.dataset.points) >= 6; })()`)
	first := eval[int](p, "points now", `Number(document.querySelector('#charts svg#metric-loss').dataset.points)`)
	p.waitJS("the chart to grow live", fmt.Sprintf(`Number(document.querySelector('#charts svg#metric-loss').dataset.points) > %d`, first))
	// And the replica's resource samples (every 2 s on this stack) as CPU and memory charts.
	p.waitJS("the CPU and memory charts of the replica's resource samples",
		`(() => { const c = document.querySelector('#charts svg#resource-cpu'), m = document.querySelector('#charts svg#resource-memory'); return !!c && !!m && Number(c.dataset.points) >= 2 && Number(m.dataset.points) >= 2; })()`)
	p.do("search the logs", chromedp.SendKeys(chromedp.CSS("#log-search"), "line 3"))
	visible := eval[[]string](p, "visible lines", `Array.from(document.querySelectorAll('#log .line')).filter(l => !l.hidden).map(l => l.textContent)`)
	if len(visible) == 0 {
		t.Fatal("searching the logs for 'line 3' shows no line")
	}
	for _, l := range visible {
		if !strings.Contains(l, "line 3") {
			t.Fatalf("searching for 'line 3' shows %q", l)
		}
	}
	if spec := p.text("#spec"); !strings.Contains(spec, "framework: custom") || !strings.Contains(spec, "name: "+job) {
		t.Fatalf("the spec section does not show the job's YAML: %q", spec)
	}
	// The script that recreates the job, as `dlc job get NAME -o command` prints it.
	if cmd := p.text("#dlc-command"); !strings.Contains(cmd, "dlc job submit -f -") || !strings.Contains(cmd, "name: "+job) ||
		!strings.Contains(cmd, "client.New(") {
		t.Fatalf("the dlc command section does not recreate the job: %q", cmd)
	}
	p.screenshot("job")

	// Stop from the page.
	// The form's POST answers once the job is terminal, then shows the job again.
	if _, err := chromedp.RunResponse(p.ctx, chromedp.Click(chromedp.CSS("#stop"))); err != nil {
		p.screenshot("failed")
		t.Fatalf("stop the job: %v", err)
	}
	p.waitJS("the page to show Stopped", `(document.querySelector('#phase')||{}).textContent === 'Stopped'`)
	if j, err := apiA.GetJob(ctx, wsA, job); err != nil || j.Status.Phase != schemas.JobStopped {
		t.Fatalf("after Stop the API says %v (err %v), want Stopped", j.Status.Phase, err)
	}

	// The filters: phase and framework select it, another phase or a label it lacks do not.
	p.waitRows(wsA, "phase=Stopped&framework=custom", job)
	p.waitRows(wsA, "phase=Running")
	p.waitRows(wsA, "label=team%3Dvision")

	// A POST without the CSRF token, or with a wrong one, is refused and stops nothing.
	target := "console-csrf"
	itest.Submit(t, ctx, apiA, itest.ShellJob(wsA, target, "sleep 120"))
	itest.WaitJob(t, ctx, apiA, wsA, target, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	stopURL := fmt.Sprintf("/ui/ws/%s/jobs/%s/stop", wsA, target)
	for _, body := range []string{"", "csrf=wrong"} {
		status := eval[int](p, "POST without the token", fmt.Sprintf(
			`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: %q, redirect: 'manual'}).then(r => r.status)`, stopURL, body))
		if status != http.StatusForbidden {
			t.Fatalf("POST %s with body %q answered %d, want 403", stopURL, body, status)
		}
	}
	if j, err := apiA.GetJob(ctx, wsA, target); err != nil || j.Status.Phase != schemas.JobRunning {
		t.Fatalf("after refused POSTs the job is %v (err %v), want still Running", j.Status.Phase, err)
	}
	p.screenshot("csrf")

	// Workspace B's member sees nothing of A: not in its list, not by URL, and cannot stop it.
	p.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.signIn(tokB)
	if loc := p.location(); !strings.HasSuffix(loc, "/ui/ws/"+wsB+"/jobs") {
		t.Fatalf("B's sign-in lands at %s", loc)
	}
	if n := eval[int](p, "rows", `document.querySelectorAll('#job-rows tr[data-job]').length`); n != 0 {
		t.Fatalf("workspace B's jobs page lists %d jobs, want none", n)
	}
	for _, path := range []string{"/ui/ws/" + wsA + "/jobs", "/ui/ws/" + wsA + "/jobs/" + job, "/ui/ws/" + wsA + "/live/jobs/" + job + "/logs"} {
		p.do("open "+path, chromedp.Navigate(env.e.APIURL+path))
		body := p.text("body")
		if strings.Contains(body, "console line") || strings.Contains(body, "framework: custom") {
			t.Fatalf("B sees A's job at %s: %q", path, body)
		}
		if st := p.text("#error-status"); st != "404" {
			t.Fatalf("B opening %s: status %s, want 404 as for nothing there", path, st)
		}
	}
	p.do("back to B's jobs", chromedp.Navigate(env.e.APIURL+"/ui/ws/"+wsB+"/jobs"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
	status := eval[int](p, "B stops A's job", fmt.Sprintf(
		`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'csrf=' + document.body.dataset.csrf, redirect: 'manual'}).then(r => r.status)`, stopURL))
	if status != http.StatusNotFound {
		t.Fatalf("B's POST (with B's CSRF token) to stop A's job answered %d, want 404", status)
	}
	if j, err := apiA.GetJob(ctx, wsA, target); err != nil || j.Status.Phase != schemas.JobRunning {
		t.Fatalf("after B's POST A's job is %v (err %v), want still Running", j.Status.Phase, err)
	}
	p.screenshot("other-workspace")

	// With the right token (A's session), the same POST stops it.
	p.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.signIn(tokA)
	status = eval[int](p, "A stops its job", fmt.Sprintf(
		`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'csrf=' + document.body.dataset.csrf, redirect: 'manual'}).then(r => r.type === 'opaqueredirect' ? 303 : r.status)`, stopURL))
	if status != http.StatusSeeOther {
		t.Fatalf("A's POST with its CSRF token answered %d, want 303 to the job", status)
	}
	if j, err := apiA.GetJob(ctx, wsA, target); err != nil || j.Status.Phase != schemas.JobStopped {
		t.Fatalf("after A's POST the job is %v (err %v), want Stopped", j.Status.Phase, err)
	}
}

// TestConsoleExperimentSchedulePipeline opens an experiment in Chromium and sorts its
// trials by the objective both ways, checks the best parameters and the objective chart;
// pauses, resumes and triggers a schedule from its page, each checked through the API;
// and shows a finished pipeline run's DAG with each step's state and job.
func TestConsoleExperimentSchedulePipeline(t *testing.T) {
	ctx := itest.Context(t, 5*time.Minute)
	ws := workspace(t)
	tok, c := memberClient(t, ctx, ws)
	exp := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: sweep, workspace: %s}
spec:
  searchSpace: [{name: x, type: categorical, values: ["3", "1", "4", "2"]}]
  objective: {metric: loss, direction: minimize}
  algorithm: {name: grid}
  maxTrials: 4
  parallelism: 4
  trialTemplate:
    framework: custom
    command: [sh, -c, "echo dlc:metric step=1 loss=${params.x}"]
    roles: {worker: {replicas: 1}}
`, ws)
	if _, err := c.CreateExperiment(ctx, []byte(exp)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSchedule(ctx, scheduleDoc(ws, "nightly", "0 3 1 1 *", "")); err != nil {
		t.Fatal(err)
	}
	pipeline := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: flow, workspace: %s}
spec:
  steps:
    - name: prep
      job: {framework: custom, command: [sh, -c, 'echo prep'], roles: {worker: {replicas: 1}}}
    - name: train-a
      dependsOn: [prep]
      job: {framework: custom, command: [sh, -c, 'echo a'], roles: {worker: {replicas: 1}}}
    - name: train-b
      dependsOn: [prep]
      job: {framework: custom, command: [sh, -c, 'echo b'], roles: {worker: {replicas: 1}}}
`, ws)
	if _, err := c.RunPipeline(ctx, []byte(pipeline), nil); err != nil {
		t.Fatal(err)
	}
	done := waitExperiment(t, ctx, c, ws, "sweep")
	if done.Status.Completed != 4 {
		t.Fatalf("experiment: %d trials completed, want 4", done.Status.Completed)
	}

	p := newPage(t, ctx)
	p.signIn(tok)
	p.do("open the experiment", chromedp.Navigate(env.e.APIURL+"/ui/ws/"+ws+"/experiments"),
		chromedp.Click(chromedp.CSS(`#experiments a`)), chromedp.WaitVisible(chromedp.CSS("#trials")))
	objective := func() []string {
		return eval[[]string](p, "objective column", `Array.from(document.querySelectorAll('#trials tbody tr')).map(r => r.cells[2].dataset.value)`)
	}
	p.do("sort by the objective", chromedp.Click(chromedp.CSS("#sort-objective")))
	if got := strings.Join(objective(), ","); got != "1,2,3,4" {
		t.Fatalf("trials sorted by loss, ascending: %s", got)
	}
	p.do("sort again", chromedp.Click(chromedp.CSS("#sort-objective")))
	if got := strings.Join(objective(), ","); got != "4,3,2,1" {
		t.Fatalf("trials sorted by loss, descending: %s", got)
	}
	if best := p.text("#best-params tbody"); !strings.Contains(best, "x") || !strings.Contains(best, "1") {
		t.Fatalf("best parameters: %q, want x = 1", best)
	}
	if n := eval[int](p, "chart points", `Number(document.querySelector('svg#objective').dataset.points)`); n != 8 {
		t.Fatalf("objective chart has %d points, want 4 trials and 4 best-so-far", n)
	}
	if best := p.text("#trials tr.best td"); !strings.HasPrefix(best, eval[string](p, "best trial", `document.querySelector('#trials tr.best').dataset.trial`)) {
		t.Fatalf("best row %q", best)
	}
	p.screenshot("experiment")

	// Pause, resume and trigger the schedule from its page.
	p.do("open the schedule", chromedp.Navigate(env.e.APIURL+"/ui/ws/"+ws+"/schedules"),
		chromedp.Click(chromedp.CSS(`tr[data-schedule="nightly"] a`)), chromedp.WaitVisible(chromedp.CSS("#pause")))
	click := func(sel string) {
		t.Helper()
		if _, err := chromedp.RunResponse(p.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			p.screenshot("failed")
			t.Fatalf("click %s: %v", sel, err)
		}
	}
	p.do("write a note", chromedp.SendKeys(chromedp.CSS("#pause-note"), "maintenance"))
	click("#pause")
	if st := p.text("#state"); st != "Paused" {
		t.Fatalf("after Pause the page says %q", st)
	}
	if v, err := c.GetSchedule(ctx, ws, "nightly", 1); err != nil || !v.Status.Paused || v.Status.PauseNote != "maintenance" {
		t.Fatalf("after Pause the API says paused=%v note %q (err %v)", v.Status.Paused, v.Status.PauseNote, err)
	}
	p.screenshot("schedule-paused")
	click("#resume")
	if st := p.text("#state"); st != "Active" {
		t.Fatalf("after Resume the page says %q", st)
	}
	if v, err := c.GetSchedule(ctx, ws, "nightly", 1); err != nil || v.Status.Paused {
		t.Fatalf("after Resume the API says paused=%v (err %v)", v.Status.Paused, err)
	}
	click("#trigger")
	waitSchedule(t, ctx, c, ws, "nightly", "triggered", func(v *api.ScheduleView) bool {
		return len(v.Status.Running)+len(v.Status.History) > 0
	})
	p.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#runs")))
	if runs := p.text("#runs tbody"); !strings.Contains(runs, "Trigger") {
		t.Fatalf("the runs table shows no triggered run: %q", runs)
	}
	p.screenshot("schedule")

	// The pipeline run's DAG: every step Succeeded, the two trainings after prep.
	if run, err := c.WaitPipeline(ctx, ws, "flow", 200*time.Millisecond, nil); err != nil || run.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("pipeline: %v (err %v)", run.Status.Phase, err)
	}
	p.do("open the pipeline", chromedp.Navigate(env.e.APIURL+"/ui/ws/"+ws+"/pipelines"),
		chromedp.Click(chromedp.CSS(`tr[data-pipeline="flow"] a`)), chromedp.WaitVisible(chromedp.CSS("#dag")))
	steps := eval[[]string](p, "DAG steps", `Array.from(document.querySelectorAll('#dag g.step')).map(g => g.dataset.step + '=' + g.dataset.phase)`)
	if got := strings.Join(steps, ","); got != "prep=Succeeded,train-a=Succeeded,train-b=Succeeded" {
		t.Fatalf("DAG steps %s", got)
	}
	if n := eval[int](p, "edges", `document.querySelectorAll('#dag line.edge').length`); n != 2 {
		t.Fatalf("DAG has %d edges, want 2 (prep to each training)", n)
	}
	if job := p.text(`#steps tr[data-step="train-b"] a`); job != schemas.StepJobName("flow", "train-b") {
		t.Fatalf("train-b's job link says %q", job)
	}
	p.screenshot("pipeline")
}
