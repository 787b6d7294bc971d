package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/internal/runsfake"
	"github.com/opendlc/opendlc/runs"
)

// testUID is a run uid of the form Temporal gives run ids.
const testUID = "0b7c8a52-3f4e-4c1d-9a2b-1c2d3e4f5a6b"

// uidN is the nth test uid.
func uidN(n int) string { return strings.Replace(testUID, "0b", string(rune('0'+n))+"b", 1) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// historyRecords are records of two workspaces: alpha's job runs (one from a schedule,
// one a trial of an experiment the schedule started) and beta's job with alpha's uid.
func historyRecords() []runs.Record {
	trial := 0
	return []runs.Record{
		{Workspace: "alpha", Kind: runs.KindJob, Name: "train", UID: uidN(0), Phase: "Succeeded", Labels: map[string]string{"team": "cv"},
			Origin: runs.Origin{Kind: runs.OriginSchedule, Name: "nightly"}, Finished: t0, Checkpoint: "s3://ckpt/train/step-100",
			Inputs: []string{"s3://data/imagenet"}},
		{Workspace: "alpha", Kind: runs.KindJob, Name: "finetune", UID: uidN(1), Phase: "Failed", Labels: map[string]string{"team": "nlp"},
			Origin: runs.Origin{Kind: runs.OriginUser}, Finished: t0.Add(time.Hour), Inputs: []string{"s3://ckpt/train/step-100"}},
		{Workspace: "alpha", Kind: runs.KindExperiment, Name: "sweep", UID: uidN(2), Phase: "Succeeded",
			Origin: runs.Origin{Kind: runs.OriginSchedule, Name: "nightly"}, Finished: t0.Add(2 * time.Hour)},
		{Workspace: "alpha", Kind: runs.KindJob, Name: "sweep-0", UID: uidN(3), Phase: "Succeeded", Parent: uidN(2),
			Origin: runs.Origin{Kind: runs.OriginExperiment, Name: "sweep", Trial: &trial}, Finished: t0.Add(90 * time.Minute)},
		{Workspace: "beta", Kind: runs.KindJob, Name: "secret", UID: uidN(0), Phase: "Succeeded",
			Origin: runs.Origin{Kind: runs.OriginSchedule, Name: "nightly"}, Finished: t0, Checkpoint: "s3://ckpt/train/step-100"},
	}
}

// historyServer is a server with a fake run record store holding historyRecords, and
// tokens: a viewer of alpha and an admin of every workspace.
func historyServer(t *testing.T) (h http.Handler, store *runsfake.Store, viewer, admin string) {
	t.Helper()
	store = &runsfake.Store{}
	for _, r := range historyRecords() {
		if _, err := store.Put(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	authn := fakeAuth{}
	viewer = authn.token(t, "alpha-viewer", "alpha", api.RoleViewer)
	admin = authn.token(t, "root", api.AllWorkspaces, api.RoleAdmin)
	return testServer(&fakeTemporal{}, authn, WithRuns(store)).Handler(), store, viewer, admin
}

func decodeAs[T any](t *testing.T, _ any, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return v
}

func names(recs []runs.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Workspace+"/"+r.Name)
	}
	return out
}

// Without a run record store every run record route answers 503, saying so, once the
// call is authorized.
func TestHistoryRoutesWithoutStore(t *testing.T) {
	authn := fakeAuth{}
	viewer := authn.token(t, "alpha-viewer", "alpha", api.RoleViewer)
	h := testServer(&fakeTemporal{}, authn).Handler()
	for _, rt := range historyRoutes {
		rec := call(h, rt.method, concretePath(&rt, "alpha"), viewer, nil)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "run records are not configured") {
			t.Errorf("%s: %d %s, want 503 saying run records are not configured", rt.pattern(), rec.Code, rec.Body)
		}
	}
}

// A workspace's history holds its own records only, newest first, and each filter
// reaches the store's query.
func TestHistoryList(t *testing.T) {
	h, store, viewer, admin := historyServer(t)
	for _, tok := range []string{viewer, admin} {
		rec := call(h, "GET", "/v1/workspaces/alpha/history", tok, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		page := decodeAs[runs.Page](t, rec, rec.Body.Bytes())
		if got, want := names(page.Records), []string{"alpha/sweep", "alpha/sweep-0", "alpha/finetune", "alpha/train"}; !slices.Equal(got, want) {
			t.Errorf("history of alpha: %v, want %v", got, want)
		}
	}
	rec := call(h, "GET", "/v1/workspaces/beta/history", viewer, nil)
	if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "secret") {
		t.Errorf("alpha's viewer reading beta's history: %d %s, want 404", rec.Code, rec.Body)
	}

	q := url.Values{"kind": {"TrainingJob"}, "label": {"team=cv"}, "phase": {"Succeeded"}, "origin": {"Schedule/nightly"},
		"finishedAfter": {"2026-03-01"}, "finishedBefore": {"2026-03-01T13:00:00Z"}, "checkpoint": {"s3://ckpt/train"},
		"limit": {"5"}, "name": {"train"}}
	rec = call(h, "GET", "/v1/workspaces/alpha/history?"+q.Encode(), viewer, nil)
	page := decodeAs[runs.Page](t, rec, rec.Body.Bytes())
	if got := names(page.Records); !slices.Equal(got, []string{"alpha/train"}) {
		t.Errorf("filtered history: %d %v, want alpha/train", rec.Code, got)
	}
	asked := store.Queries[len(store.Queries)-1]
	want := runs.Query{Workspaces: []string{"alpha"}, Kind: runs.KindJob, Name: "train", Labels: map[string]string{"team": "cv"},
		Phase: "Succeeded", FinishedAfter: t0.Truncate(24 * time.Hour), FinishedBefore: t0.Add(time.Hour),
		OriginKind: "Schedule", OriginName: "nightly", Checkpoint: "s3://ckpt/train", Limit: 5}
	if !equalQuery(asked, want) {
		t.Errorf("query %+v, want %+v", asked, want)
	}

	// Paging: two pages of two, the second from the first's next.
	rec = call(h, "GET", "/v1/workspaces/alpha/history?limit=2", viewer, nil)
	first := decodeAs[runs.Page](t, rec, rec.Body.Bytes())
	rec = call(h, "GET", "/v1/workspaces/alpha/history?limit=2&after="+url.QueryEscape(first.Next), viewer, nil)
	second := decodeAs[runs.Page](t, rec, rec.Body.Bytes())
	if len(first.Records) != 2 || first.Next == "" || !slices.Equal(names(second.Records), []string{"alpha/finetune", "alpha/train"}) || second.Next != "" {
		t.Errorf("pages %v (next %q) then %v (next %q)", names(first.Records), first.Next, names(second.Records), second.Next)
	}
}

func equalQuery(a, b runs.Query) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// Every bad history, lineage or usage parameter is answered 400 naming it, and the
// store is not asked.
func TestHistoryBadParams(t *testing.T) {
	h, store, viewer, _ := historyServer(t)
	for _, c := range []struct{ path, field string }{
		{"/v1/workspaces/alpha/history?finishedAfter=yesterday", "finishedAfter"},
		{"/v1/workspaces/alpha/history?finishedBefore=2026-13-01", "finishedBefore"},
		{"/v1/workspaces/alpha/history?finishedAfter=2026-03-02&finishedBefore=2026-03-01", "finishedBefore"},
		{"/v1/workspaces/alpha/history?kind=Job", "kind"},
		{"/v1/workspaces/alpha/history?kind=Schedule", "kind"},
		{"/v1/workspaces/alpha/history?origin=Cron/x", "origin"},
		{"/v1/workspaces/alpha/history?origin=Schedule/Bad_Name", "origin"},
		{"/v1/workspaces/alpha/history?parent=exp-1", "parent"},
		{"/v1/workspaces/alpha/history?checkpoint=ckpt/x", "checkpoint"},
		{"/v1/workspaces/alpha/history?limit=0", "limit"},
		{"/v1/workspaces/alpha/history?limit=1001", "limit"},
		{"/v1/workspaces/alpha/history?label=team", "label"},
		{"/v1/workspaces/alpha/history?label=team=cv&label=team=nlp", "label"},
		{"/v1/workspaces/alpha/history?after=a%20b", "after"},
		{"/v1/workspaces/alpha/history/Job/" + testUID, "kind"},
		{"/v1/workspaces/alpha/history/TrainingJob/x", "uid"},
		{"/v1/workspaces/alpha/lineage", "checkpoint"},
		{"/v1/workspaces/alpha/lineage?checkpoint=s3://b/x&schedule=nightly", "checkpoint"},
		{"/v1/workspaces/alpha/lineage?schedule=Nightly", "schedule"},
		{"/v1/usage?from=last-week", "from"},
		{"/v1/usage?from=2026-03-02&to=2026-03-01", "to"},
		{"/v1/usage?from=2024-01-01&to=2026-03-01", "from"},
		{"/v1/usage?groupByLabel=team=cv", "groupByLabel"},
	} {
		rec := call(h, "GET", c.path, viewer, nil)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", c.path, rec.Code, rec.Body, c.field)
		}
	}
	if len(store.Queries)+len(store.UsageQueries) != 0 {
		t.Errorf("refused calls asked the store %d queries and %d usage queries", len(store.Queries), len(store.UsageQueries))
	}
}

// One record by kind and uid, of the path's workspace only: beta's record with the
// same uid is not alpha's, and alpha's viewer gets 404 for beta's, not 403.
func TestHistoryGet(t *testing.T) {
	h, _, viewer, admin := historyServer(t)
	rec := call(h, "GET", "/v1/workspaces/alpha/history/TrainingJob/"+uidN(0), viewer, nil)
	got := decodeAs[runs.Record](t, rec, rec.Body.Bytes())
	if rec.Code != http.StatusOK || got.Name != "train" || got.Workspace != "alpha" || got.Checkpoint != "s3://ckpt/train/step-100" {
		t.Errorf("alpha's record: %d %s", rec.Code, rec.Body)
	}
	for _, c := range []struct{ path, tok string }{
		{"/v1/workspaces/beta/history/TrainingJob/" + uidN(0), viewer},
		{"/v1/workspaces/alpha/history/Experiment/" + uidN(0), viewer},
		{"/v1/workspaces/alpha/history/TrainingJob/" + uidN(9), admin},
	} {
		rec := call(h, "GET", c.path, c.tok, nil)
		if rec.Code != http.StatusNotFound || errorCode(t, rec.Body.Bytes()) != api.CodeNotFound || strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("%s: %d %s, want 404", c.path, rec.Code, rec.Body)
		}
	}
	rec = call(h, "GET", "/v1/workspaces/beta/history/TrainingJob/"+uidN(0), admin, nil)
	if got := decodeAs[runs.Record](t, rec, rec.Body.Bytes()); got.Name != "secret" {
		t.Errorf("an admin reading beta's record: %d %s", rec.Code, rec.Body)
	}
}

// Lineage from a checkpoint: the run that wrote it and the one that read it, in the
// path's workspace only; from a schedule: its runs and the experiment's trial.
func TestLineage(t *testing.T) {
	h, _, viewer, _ := historyServer(t)
	rec := call(h, "GET", "/v1/workspaces/alpha/lineage?checkpoint="+url.QueryEscape("s3://ckpt/train/step-100"), viewer, nil)
	l := decodeAs[api.Lineage](t, rec, rec.Body.Bytes())
	if got := names(l.Records); rec.Code != http.StatusOK || !slices.Equal(got, []string{"alpha/finetune", "alpha/train"}) {
		t.Errorf("checkpoint lineage: %d %v, want alpha/finetune (read it) and alpha/train (wrote it)", rec.Code, got)
	}
	if len(l.Records) == 2 && !slices.Equal(l.Records[1].Inputs, []string{"s3://data/imagenet"}) {
		t.Errorf("the writer's inputs: %v", l.Records[1].Inputs)
	}
	rec = call(h, "GET", "/v1/workspaces/alpha/lineage?schedule=nightly", viewer, nil)
	l = decodeAs[api.Lineage](t, rec, rec.Body.Bytes())
	if got := names(l.Records); !slices.Equal(got, []string{"alpha/sweep", "alpha/sweep-0", "alpha/train"}) || l.Truncated {
		t.Errorf("schedule lineage: %d %v, want the schedule's job and experiment and the experiment's trial", rec.Code, got)
	}
}

// Usage: a workspace's token reads its own workspace's (and is refused another's,
// naming it); a token of every workspace reads any, by default all; the default range
// is the last 30 days.
func TestUsage(t *testing.T) {
	h, store, viewer, admin := historyServer(t)
	store.Rows = []runs.UsageRow{
		{Workspace: "alpha", Day: "2026-03-01", GPUHours: 8, CPUHours: 16, MemoryGiBHours: 64, Runs: 2},
		{Workspace: "beta", Day: "2026-03-01", GPUHours: 1, Runs: 1},
	}
	rec := call(h, "GET", "/v1/usage", viewer, nil)
	u := decodeAs[api.Usage](t, rec, rec.Body.Bytes())
	if rec.Code != http.StatusOK || len(u.Rows) != 1 || u.Rows[0] != store.Rows[0] {
		t.Errorf("alpha's usage: %d %s", rec.Code, rec.Body)
	}
	asked := store.UsageQueries[len(store.UsageQueries)-1]
	if !slices.Equal(asked.Workspaces, []string{"alpha"}) || asked.To.Sub(asked.From) != 30*24*time.Hour || time.Since(asked.To) > time.Hour {
		t.Errorf("usage query %+v, want alpha's last 30 days", asked)
	}
	for _, ws := range []string{"beta", "*"} {
		rec = call(h, "GET", "/v1/usage?workspace=alpha&workspace="+url.QueryEscape(ws), viewer, nil)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "workspace "+ws) || strings.Contains(rec.Body.String(), "gpuHours") {
			t.Errorf("alpha's viewer asking %s's usage: %d %s, want 403 naming it", ws, rec.Code, rec.Body)
		}
	}
	n := len(store.UsageQueries)
	rec = call(h, "GET", "/v1/usage?groupByLabel=team&from=2026-02-01&to=2026-03-02T00:00:00Z", admin, nil)
	u = decodeAs[api.Usage](t, rec, rec.Body.Bytes())
	asked = store.UsageQueries[len(store.UsageQueries)-1]
	if len(store.UsageQueries) != n+1 || len(u.Rows) != 2 || asked.Workspaces != nil || asked.GroupByLabel != "team" ||
		!asked.From.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) || !asked.To.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("an admin's usage: %s, query %+v", rec.Body, asked)
	}
	rec = call(h, "GET", "/v1/usage?workspace=beta", admin, nil)
	u = decodeAs[api.Usage](t, rec, rec.Body.Bytes())
	if len(u.Rows) != 1 || u.Rows[0].Workspace != "beta" {
		t.Errorf("an admin's usage of beta: %s", rec.Body)
	}
}

// Valid values of the run record parameters pass their checks.
func TestHistoryValidParamsPass(t *testing.T) {
	for name, values := range map[string][]string{
		"kind":           {"TrainingJob", "Experiment", "Pipeline"},
		"name":           {"train", "sweep-0"},
		"schedule":       {"nightly"},
		"finishedAfter":  {"2026-03-01", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00.123456789+02:00"},
		"finishedBefore": {"2026-03-01"},
		"from":           {"2026-03-01"},
		"to":             {"2026-03-01T00:00:00Z"},
		"origin":         {"User", "Schedule/nightly", "Trigger/on-data", "Pipeline/p", "Experiment/sweep"},
		"parent":         {testUID},
		"checkpoint":     {"s3://ckpt", "s3://ckpt/train/step-100/", "file:///data/x", "gs://b/a"},
		"after":          {"c1", "eyJhIjoxfQ", "eyJhIjoxfQ==", "AbC+/x=", "2026-03-01T12:00:00Z/" + testUID},
		"groupByLabel":   {"team", "app.kubernetes.io/name"},
	} {
		for _, v := range values {
			if msg := queryChecks[name](v); msg != "" {
				t.Errorf("%s=%q refused: %s", name, v, msg)
			}
		}
	}
	for name, values := range map[string][]string{"kind": {"TrainingJob", "Pipeline"}, "uid": {testUID}} {
		for _, v := range values {
			if msg := pathChecks[name](v); msg != "" {
				t.Errorf("{%s}=%q refused: %s", name, v, msg)
			}
		}
	}
}
