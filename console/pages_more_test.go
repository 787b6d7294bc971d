package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

func TestSubmittedDocumentGetsThePagesWorkspaceOnlyWhenItNamesNone(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"kind: TrainingJob\nmetadata: {name: a}\n", `{"kind":"TrainingJob","metadata":{"name":"a","workspace":"w"}}`},
		{"kind: TrainingJob\n", `{"kind":"TrainingJob","metadata":{"workspace":"w"}}`},
		{`{"metadata": {"name": "a", "workspace": ""}}`, `{"metadata":{"name":"a","workspace":"w"}}`},
		// Another workspace, something not an object, and bad YAML are sent as written.
		{"metadata: {name: a, workspace: other}\n", "metadata: {name: a, workspace: other}\n"},
		{"- a\n- b\n", "- a\n- b\n"},
		{"metadata: [1, 2]\n", "metadata: [1, 2]\n"},
		{"a: [\n", "a: [\n"},
	} {
		got := string(inWorkspace(tc.in, "w"))
		if tc.want[0] == '{' {
			var g, w any
			if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(tc.want), &w) != nil || !jsonEqual(g, w) {
				t.Errorf("inWorkspace(%q) = %s, want %s", tc.in, got, tc.want)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("inWorkspace(%q) = %q, want it unchanged", tc.in, got)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestParamChartsPlotTheObjectiveByEachParameter(t *testing.T) {
	v := func(f float64) *float64 { return &f }
	exp := &api.ExperimentDetail{Spec: schemas.Experiment{Spec: schemas.ExperimentSpec{
		Objective: schemas.ObjectiveSpec{Metric: "loss", Direction: schemas.Minimize}}},
		Status: schemas.ExperimentStatus{Trials: []schemas.TrialStatus{
			{ID: 0, Value: v(0.9), Phase: schemas.TrialCompleted, Params: map[string]any{"lr": 0.1, "opt": "sgd"}},
			{ID: 1, Value: v(0.4), Phase: schemas.TrialCompleted, Params: map[string]any{"lr": 0.01, "opt": "adam"}},
			{ID: 2, Value: v(1.5), Phase: schemas.TrialPruned, Params: map[string]any{"lr": 1.0, "opt": "sgd"}},
			{ID: 3, Phase: schemas.TrialRunning, Params: map[string]any{"lr": 0.5, "opt": "adagrad"}},
		}}}
	charts := paramCharts(exp, []string{"lr", "opt"})
	if len(charts) != 2 {
		t.Fatalf("%d charts, want one per parameter", len(charts))
	}
	lr, opt := charts[0], charts[1]
	if lr.Categories != nil || len(lr.Series) != 2 || len(lr.Series[0].Points) != 2 || lr.Series[1].Name != "pruned" ||
		lr.Series[1].Points[0] != (point{1.0, 1.5}) {
		t.Fatalf("lr chart: %+v", lr)
	}
	// Categorical: sorted categories of the trials with a value (the running one has none).
	if len(opt.Categories) != 2 || opt.Categories[0] != "adam" || opt.Categories[1] != "sgd" {
		t.Fatalf("opt categories %v", opt.Categories)
	}
	if opt.Series[0].Points[0] != (point{1, 0.9}) || opt.Series[0].Points[1] != (point{0, 0.4}) || opt.XLabel != "opt (0=adam, 1=sgd)" {
		t.Fatalf("opt chart: %+v", opt)
	}
	if svg := string(opt.SVG()); !contains(svg, `id="param-opt"`, `data-points="3"`) {
		t.Fatalf("opt svg: %s", svg)
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestLatestVerdictsNameTheQuarantinedNodes(t *testing.T) {
	t0 := time.Now()
	ev := func(node, status string, d time.Duration) nodeCheck {
		return nodeCheck{Time: t0.Add(d), NodeHealthData: events.NodeHealthData{Node: node, Status: status}}
	}
	nodes, q := latestVerdicts([]nodeCheck{
		ev("b", workflows.NodeStatusQuarantined, 0),
		ev("a", workflows.NodeStatusQuarantined, 1),
		ev("b", workflows.NodeStatusHealthy, 2), // released by the self-healing workflow
		ev("c", workflows.NodeStatusUnhealthy, 3),
	})
	if len(nodes) != 3 || nodes[0].Node != "a" || nodes[1].Node != "b" || nodes[1].Status != workflows.NodeStatusHealthy || nodes[1].Verdicts != 2 {
		t.Fatalf("nodes %+v", nodes)
	}
	if len(q) != 1 || q[0].Node != "a" {
		t.Fatalf("quarantined %+v, want a only (b was released)", q)
	}
}

// refusingAPI refuses every job submission with field errors, and otherwise answers
// as fakeAPI.
type refusingAPI struct{ fakeAPI }

func (f *refusingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/jobs" && r.Header.Get("Authorization") == "Bearer tok-a" {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"workspace":"a"`) {
			writeAPIError(w, http.StatusForbidden, "not the page's workspace: "+string(body))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.Error{Code: "InvalidSpec", Message: "invalid spec",
			Details: []schemas.FieldError{{Field: "spec.roles.worker.replicas", Detail: "must be >= 1"}}}})
		return
	}
	f.fakeAPI.ServeHTTP(w, r)
}

func TestSubmitFormShowsTheAPIsFieldErrorsAndKeepsTheDocument(t *testing.T) {
	f := &refusingAPI{fakeAPI{revoked: map[string]bool{}}}
	srv := httptest.NewServer(Mount(f, Options{}))
	t.Cleanup(srv.Close)
	c := browserish(t)
	csrf := signIn(t, c, srv.URL, "tok-a")
	doc := "kind: TrainingJob\nmetadata: {name: x}\nspec: {roles: {worker: {replicas: 0}}}\n"
	resp, err := c.PostForm(srv.URL+"/ui/ws/a/submit", url.Values{"csrf": {csrf}, "spec": {doc}})
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusUnprocessableEntity || !contains(body, `data-field="spec.roles.worker.replicas"`, "must be &gt;= 1",
		`role="alert"`, "spec: {roles: {worker: {replicas: 0}}}") {
		t.Fatalf("refused submission: %d %s", resp.StatusCode, body)
	}
	// Without the CSRF token the API is not called.
	resp, err = c.PostForm(srv.URL+"/ui/ws/a/submit", url.Values{"spec": {doc}})
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("submit without the CSRF token: %d", resp.StatusCode)
	}
}
