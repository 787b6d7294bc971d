package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// post POSTs a form body from the page (the browser's cookies go with it) and returns
// the status; a redirect (the answer of a form that worked) is 303.
func (p *page) post(path, body string) int {
	p.t.Helper()
	return eval[int](p, "POST "+path, fmt.Sprintf(
		`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: %s, redirect: 'manual'}).then(r => r.type === 'opaqueredirect' ? 303 : r.status)`,
		path, body))
}

// open navigates to a console path and waits for its main content.
func (p *page) open(path string) {
	p.t.Helper()
	p.do("open "+path, chromedp.Navigate(env.e.APIURL+path), chromedp.WaitVisible(chromedp.CSS("main")))
}

// openUntil opens a console path again and again until predicate (JavaScript) holds,
// for at most a minute: what the page shows may come from a store that lags a moment.
func (p *page) openUntil(what, path, predicate string) {
	p.t.Helper()
	defer func() {
		if p.t.Failed() {
			p.screenshot("failed")
		}
	}()
	testutil.Eventually(p.t, time.Minute, what+": "+path+" to show it", func() bool {
		p.open(path)
		return eval[bool](p, what, predicate)
	}, 300*time.Millisecond)
}

// setValue replaces the value of a form field (a textarea's YAML).
func (p *page) setValue(sel, value string) {
	p.t.Helper()
	p.do("fill "+sel, chromedp.SetValue(chromedp.CSS(sel), value))
}

// submitForm clicks a form's button and waits for the answer's page.
func (p *page) submitForm(button string) {
	p.t.Helper()
	if _, err := chromedp.RunResponse(p.ctx, chromedp.Click(chromedp.CSS(button))); err != nil {
		p.screenshot("failed")
		p.t.Fatalf("click %s: %v", button, err)
	}
}

// TestConsoleSubmitJobFromForm submits a job from the console's form in Chromium: a
// document with a wrong field is refused with its field path and creates nothing, a
// POST without the CSRF token is refused, and a good document (without a workspace:
// the page's is used) becomes a job whose page shows its phase change live to
// Succeeded, streams its logs to the last line and draws its metric chart. The job is
// then cloned with overrides from its page; a clone without the CSRF token is refused.
func TestConsoleSubmitJobFromForm(t *testing.T) {
	ctx := itest.Context(t, 5*time.Minute)
	ws := workspace(t)
	tok, c := memberClient(t, ctx, ws)
	p := newPage(t, ctx)
	p.signIn(tok)
	p.do("open the submit form", chromedp.Click(chromedp.CSS("#new-job")), chromedp.WaitVisible(chromedp.CSS("#submit-yaml")))
	if lbl := p.text(`label[for="submit-yaml"]`); !strings.Contains(lbl, "TrainingJob") {
		t.Fatalf("the document field's label: %q", lbl)
	}
	p.screenshot("submit")

	// A wrong field: refused with its path, the document kept, nothing created.
	bad := `apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: ui-bad}
spec:
  framework: custom
  command: [sh, -c, "echo never"]
  roles: {worker: {replicas: 0}}
`
	p.setValue("#submit-yaml", bad)
	p.submitForm("#submit-button")
	p.do("see the refusal", chromedp.WaitVisible(chromedp.CSS("#submit-errors")))
	fields := eval[[]string](p, "refused fields", `Array.from(document.querySelectorAll('#submit-details li')).map(l => l.dataset.field)`)
	if !strings.Contains(strings.Join(fields, ","), "spec.roles.worker.replicas") {
		t.Fatalf("the refusal names fields %v, want spec.roles.worker.replicas (message %q)", fields, p.text("#submit-errors"))
	}
	if kept := eval[string](p, "the document", `document.getElementById('submit-yaml').value`); kept != bad {
		t.Fatalf("the refused document is not kept as written: %q", kept)
	}
	if focused := eval[string](p, "focus", `document.activeElement.id`); focused != "submit-errors" {
		t.Fatalf("after a refusal the focus is on %q, want the errors", focused)
	}
	if _, err := c.GetJob(ctx, ws, "ui-bad"); !dlc.IsNotFound(err) {
		t.Fatalf("the refused job exists: %v", err)
	}
	p.screenshot("submit-errors")

	// Without the CSRF token (or with a wrong one): 403, nothing created.
	job := "ui-submitted"
	const lines = 12
	doc := fmt.Sprintf(`apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s}
spec:
  framework: custom
  command: [sh, -c, 'i=1; while [ $i -le %d ]; do echo "ui line $i"; echo "dlc:metric step=$i loss=$((100 / i)).5"; i=$((i+1)); sleep 0.5; done; echo "ui last line"']
  roles: {worker: {replicas: 1}}
`, job, lines)
	submitPath := "/ui/ws/" + ws + "/submit"
	for _, body := range []string{"'spec=' + encodeURIComponent(%q)", "'csrf=wrong&spec=' + encodeURIComponent(%q)"} {
		if st := p.post(submitPath, fmt.Sprintf(body, doc)); st != http.StatusForbidden {
			t.Fatalf("POST %s without the CSRF token answered %d, want 403", submitPath, st)
		}
	}
	if _, err := c.GetJob(ctx, ws, job); !dlc.IsNotFound(err) {
		t.Fatalf("a POST without the CSRF token created the job: %v", err)
	}

	// The good document: the job's page follows it to Succeeded without a reload.
	p.setValue("#submit-yaml", doc)
	p.submitForm("#submit-button")
	p.do("the job's page", chromedp.WaitVisible(chromedp.CSS("#phase")))
	if loc := p.location(); !strings.HasSuffix(loc, "/ui/ws/"+ws+"/jobs/"+job) {
		t.Fatalf("after submitting, the browser is at %s", loc)
	}
	first := p.text("#phase")
	p.do("watch the phase", chromedp.Evaluate[chromedp.Void](`window.__notReloaded = true; window.__phases = [document.getElementById('phase').textContent];
new MutationObserver(() => { const p = document.getElementById('phase'); if (p && window.__phases[window.__phases.length-1] !== p.textContent) window.__phases.push(p.textContent); })
  .observe(document.getElementById('status'), {childList: true, subtree: true});`))
	if first == "Succeeded" {
		t.Fatalf("the job was already Succeeded when its page opened: no live update to see")
	}
	p.waitJS("the job to succeed", `(document.getElementById('phase')||{}).textContent === 'Succeeded'`)
	phases := eval[[]string](p, "phases seen", `window.__phases`)
	if !eval[bool](p, "not reloaded", `window.__notReloaded === true`) || len(phases) < 2 {
		t.Fatalf("the page did not follow the job live: phases seen %v", phases)
	}
	t.Logf("phases the page showed, live: %v", phases)
	if j, err := c.GetJob(ctx, ws, job); err != nil || j.Status.Phase != schemas.JobSucceeded || j.Spec.Metadata.Workspace != ws {
		t.Fatalf("the API says %+v (err %v), want Succeeded in %s", j.Status.Phase, err, ws)
	}
	p.waitJS("the last log line", `Array.from(document.querySelectorAll('#log .line')).some(l => l.textContent.includes('ui last line'))`)
	p.waitJS("the log stream to end", `document.getElementById('log-state').dataset.state === 'ended'`)
	p.waitJS("the loss chart with every step", fmt.Sprintf(`(() => { const s = document.querySelector('#charts svg#metric-loss'); return !!s && Number(s.dataset.points) === %d; })()`, lines))
	p.screenshot("submitted-job")

	// Clone with overrides from the page; without the CSRF token it is refused.
	clonePath := "/ui/ws/" + ws + "/jobs/" + job + "/clone"
	if st := p.post(clonePath, `'name=ui-clone-forged&overrides='`); st != http.StatusForbidden {
		t.Fatalf("clone without the CSRF token answered %d, want 403", st)
	}
	if _, err := c.GetJob(ctx, ws, "ui-clone-forged"); !dlc.IsNotFound(err) {
		t.Fatalf("a clone without the CSRF token was made: %v", err)
	}
	p.do("fill the clone form", chromedp.SendKeys(chromedp.CSS("#clone-name"), "ui-clone"))
	p.setValue("#clone-overrides", "metadata: {labels: {cloned: from-ui}}\nspec: {faultTolerance: {maxRestarts: 2}}")
	p.submitForm("#clone")
	p.do("the clone's page", chromedp.WaitVisible(chromedp.CSS("#phase")))
	cl, err := c.GetJob(ctx, ws, "ui-clone")
	if err != nil || cl.Spec.Metadata.Labels["cloned"] != "from-ui" || cl.Spec.Spec.FaultTolerance.MaxRestarts != 2 {
		t.Fatalf("the clone: %+v (err %v), want the overrides' label and maxRestarts 2", cl, err)
	}
}

// TestConsoleTriggersRulesWorkspaceNodes fills the console's triggers, notification
// rules, workspace and nodes pages with real objects in Chromium: a trigger and a rule
// applied from their forms (a wrong rule is refused with its field path), the trigger
// fired by an event and the job it started listed on its page; the workspace page's
// quota, and for the workspace's administrator its tokens and the audit records of the
// member's actions; the nodes page hidden from a member and, for an administrator,
// showing node-health verdicts. A member of another workspace gets 404 for each of
// these pages and objects, by URL or by form, and changes nothing.
func TestConsoleTriggersRulesWorkspaceNodes(t *testing.T) {
	ctx := itest.Context(t, 5*time.Minute)
	wsA, wsB, tokA, tokB := twoMembers(t, ctx)
	tokAdminA := createToken(t, ctx, wsA+"-wsadmin", wsA, api.RoleWorkspaceAdmin)
	tokAdmin := createToken(t, ctx, wsA+"-admin", api.AllWorkspaces, api.RoleAdmin)
	gpus := int64(4)
	if err := env.api.SetQuota(ctx, wsA, api.Quota{GPU: &gpus, CPU: "16"}); err != nil {
		t.Fatal(err)
	}

	p := newPage(t, ctx)
	p.signIn(tokA)

	// A trigger from the apply form; an event fires it and its page lists the job.
	p.open("/ui/ws/" + wsA + "/triggers")
	trigger := fmt.Sprintf(`apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-data}
spec:
  subject: dlc.%s.trigger.on-data
  filter: [{field: type, equals: com.example.data.ready}]
  params: {key: "${event.data.key}"}
  action:
    job:
      framework: custom
      command: [sh, -c, "echo new data ${params.key}"]
      roles: {worker: {replicas: 1}}
`, wsA)
	p.setValue("#trigger-yaml", trigger)
	p.submitForm("#trigger-button")
	p.do("the trigger's page", chromedp.WaitVisible(chromedp.CSS("#trigger-subject")))
	if s := p.text("#trigger-subject"); s != "dlc."+wsA+".trigger.on-data" {
		t.Fatalf("trigger subject %q", s)
	}
	if _, err := env.events.JetStream().Publish(ctx, "dlc."+wsA+".trigger.on-data", dataReady("ui-1", "clicks/ui.csv", 0.5)); err != nil {
		t.Fatal(err)
	}
	started := schemas.TriggerRunName("on-data", "/etl/clicks ui-1")
	p.openUntil("the started job on the trigger's page", "/ui/ws/"+wsA+"/triggers/on-data",
		fmt.Sprintf(`!!document.querySelector('#trigger-fired tr[data-started=%q] a')`, started))
	p.screenshot("trigger")
	p.open("/ui/ws/" + wsA + "/triggers")
	if n := eval[int](p, "trigger rows", `document.querySelectorAll('#triggers tr[data-trigger="on-data"]').length`); n != 1 {
		t.Fatalf("the triggers list shows on-data %d times", n)
	}
	p.screenshot("triggers")

	// A wrong rule is refused with its field path; a good one is applied.
	p.open("/ui/ws/" + wsA + "/rules")
	p.setValue("#rule-yaml", "apiVersion: opendlc.io/v1alpha1\nkind: NotificationRule\nmetadata: {name: bad-rule}\nspec:\n  match: {phases: [Exploded]}\n  subject: dlc."+wsA+".notify.x\n")
	p.submitForm("#rule-button")
	p.do("the refusal", chromedp.WaitVisible(chromedp.CSS("#rule-errors")))
	if f := eval[string](p, "field", `Array.from(document.querySelectorAll('#rule-details li')).map(l => l.dataset.field).join(',')`); !strings.Contains(f, "spec.match.phases") {
		t.Fatalf("the rule's refusal names %q, want spec.match.phases", f)
	}
	p.setValue("#rule-yaml", fmt.Sprintf("apiVersion: opendlc.io/v1alpha1\nkind: NotificationRule\nmetadata: {name: failures}\nspec:\n  match: {phases: [Failed]}\n  subject: dlc.%s.notify.failures\n", wsA))
	p.submitForm("#rule-button")
	p.do("the rule's page", chromedp.WaitVisible(chromedp.CSS("#rule-match")))
	if m := p.text("#rule-match"); !strings.Contains(m, "Failed") {
		t.Fatalf("rule match %q", m)
	}
	p.screenshot("rule")
	p.open("/ui/ws/" + wsA + "/rules")
	if rows := eval[[]string](p, "rules", `Array.from(document.querySelectorAll('#rules tr[data-rule]')).map(r => r.dataset.rule)`); strings.Join(rows, ",") != "failures" {
		t.Fatalf("the rules list shows %v, want failures only", rows)
	}
	p.screenshot("rules")

	// The workspace page of a member: the quota, no tokens, no audit records.
	p.open("/ui/ws/" + wsA + "/workspace")
	if lim := p.text(`#quota tr[data-resource="gpu"] td:nth-child(3)`); lim != "4" {
		t.Fatalf("GPU quota %q, want 4", lim)
	}
	if n := eval[int](p, "admin sections", `document.querySelectorAll('#tokens, #audit').length`); n != 0 {
		t.Fatalf("a member sees %d of the tokens and audit sections", n)
	}
	p.screenshot("workspace")
	// The nodes page of a member: node health belongs to no workspace.
	p.open("/ui/ws/" + wsA + "/nodes")
	if n := eval[int](p, "hidden note", `document.querySelectorAll('#nodes-hidden').length`); n != 1 {
		t.Fatalf("a member's nodes page: %q", p.text("main"))
	}
	p.screenshot("nodes-member")

	// Workspace B's member sees none of it, by URL or by form.
	p.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.signIn(tokB)
	for _, path := range []string{"/triggers", "/triggers/on-data", "/rules", "/rules/failures", "/workspace", "/nodes", "/submit"} {
		p.open("/ui/ws/" + wsA + path)
		if st := p.text("#error-status"); st != "404" {
			t.Fatalf("B opening A's %s: status %s, want 404", path, st)
		}
		if body := p.text("main"); strings.Contains(body, "dlc."+wsA+".trigger") || strings.Contains(body, "notify.failures") {
			t.Fatalf("B sees A's objects at %s: %q", path, body)
		}
	}
	p.open("/ui/ws/" + wsB + "/triggers")
	if n := eval[int](p, "B's triggers", `document.querySelectorAll('#triggers tr[data-trigger]').length`); n != 0 {
		t.Fatalf("B's triggers page lists %d triggers", n)
	}
	csrf := `'csrf=' + document.body.dataset.csrf`
	for _, path := range []string{"/triggers/on-data/delete", "/rules/failures/delete"} {
		if st := p.post("/ui/ws/"+wsA+path, csrf); st != http.StatusNotFound {
			t.Fatalf("B's POST %s on A answered %d, want 404", path, st)
		}
	}
	// A document naming A, sent through B's own forms, is refused by the API.
	forged := strings.Replace(trigger, "metadata: {name: on-data}", "metadata: {name: forged, workspace: "+wsA+"}", 1)
	if st := p.post("/ui/ws/"+wsB+"/triggers", csrf+fmt.Sprintf(` + '&spec=' + encodeURIComponent(%q)`, forged)); st != http.StatusForbidden {
		t.Fatalf("B's apply of a trigger naming A answered %d, want 403", st)
	}
	if st := p.post("/ui/ws/"+wsA+"/submit", csrf+fmt.Sprintf(` + '&spec=' + encodeURIComponent(%q)`, itest.ShellJob(wsA, "forged-job", "echo x"))); st != http.StatusForbidden && st != http.StatusNotFound {
		t.Fatalf("B's submit into A answered %d, want 403 or 404", st)
	}
	if _, err := env.api.GetTrigger(ctx, wsA, "on-data"); err != nil {
		t.Fatalf("after B's POSTs A's trigger: %v", err)
	}
	if _, err := env.api.GetRule(ctx, wsA, "failures"); err != nil {
		t.Fatalf("after B's POSTs A's rule: %v", err)
	}
	for _, nf := range []error{
		func() error { _, err := env.api.GetTrigger(ctx, wsA, "forged"); return err }(),
		func() error { _, err := env.api.GetJob(ctx, wsA, "forged-job"); return err }(),
	} {
		if !dlc.IsNotFound(nf) {
			t.Fatalf("B's forged form created something in A: %v", nf)
		}
	}
	p.screenshot("other-workspace-pages")

	// The workspace's administrator sees its tokens and the audit records of the
	// member's actions (published after the answer: polled).
	p.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.signIn(tokAdminA)
	p.openUntil("the member's trigger in the audit records", "/ui/ws/"+wsA+"/workspace",
		fmt.Sprintf(`Array.from(document.querySelectorAll('#audit tr[data-actor=%q]')).some(r => r.textContent.includes('POST /v1/triggers') && r.dataset.status === '200')`, wsA+"-member"))
	toks := eval[[]string](p, "tokens", `Array.from(document.querySelectorAll('#tokens tr[data-token]')).map(r => r.dataset.token)`)
	if !strings.Contains(strings.Join(toks, ","), wsA+"-member") || strings.Contains(strings.Join(toks, ","), wsB) {
		t.Fatalf("the administrator's token list %v: want A's tokens only", toks)
	}
	// B's forged forms were refused by the API, and audited in A under B's token.
	p.openUntil("B's refused forgeries in A's audit records", "/ui/ws/"+wsA+"/workspace",
		fmt.Sprintf(`Array.from(document.querySelectorAll('#audit tr[data-actor=%q]')).some(r => r.dataset.status === '403')`, wsB+"-member"))
	p.screenshot("workspace-admin")

	// The nodes page of an administrator of every workspace. The local backend checks
	// no nodes, so the verdicts are published here as a node check of the Kubernetes
	// backend publishes them (workflows.NodeHealthEvent): one node quarantined, one
	// healthy.
	now := time.Now().UTC().Truncate(time.Second)
	bad, good := wsA+"-gpu-1", wsA+"-gpu-2"
	for _, h := range []backend.NodeHealth{
		{Node: bad, Reason: backend.ReasonQuarantined, CheckedAt: now, Quarantined: true, QuarantinedAt: &now,
			Checks: []events.HealthCheck{{Name: backend.CheckReady, OK: true}, {Name: backend.CheckGPUs, OK: false, Message: "1 of 8 GPUs answer"}}},
		{Node: good, Healthy: true, Reason: backend.ReasonChecksPassed, CheckedAt: now,
			Checks: []events.HealthCheck{{Name: backend.CheckReady, OK: true}, {Name: backend.CheckGPUs, OK: true}}},
	} {
		m, err := workflows.NodeHealthEvent(h, "ui-job")
		if err != nil {
			t.Fatal(err)
		}
		if err := env.events.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	p.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.signIn(tokAdmin)
	p.openUntil("the node verdicts", "/ui/ws/"+wsA+"/nodes",
		fmt.Sprintf(`!!document.querySelector('#quarantined tr[data-node=%q]') && !!document.querySelector('#nodes tr[data-node=%q][data-status="Healthy"]')`, bad, good))
	if q := p.text(fmt.Sprintf(`#quarantined tr[data-node=%q]`, bad)); !strings.Contains(q, "GPUs") || !strings.Contains(q, "1 of 8 GPUs answer") {
		t.Fatalf("the quarantined row %q does not name the failed check", q)
	}
	if h := p.text("#healer-state"); !strings.Contains(h, "not running") {
		t.Fatalf("self-healing section %q: the local backend starts no node-health workflow", h)
	}
	p.screenshot("nodes")
}
