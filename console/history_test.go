package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/internal/runsfake"
	"github.com/opendlc/opendlc/runs"
)

// runsAPI answers the run record routes from a fake store, scoped as the API scopes
// them (the token's workspace; another's is 404), and the rest as fakeAPI. Without a
// store it answers them 503, as a server started without run records.
type runsAPI struct {
	fakeAPI
	store *runsfake.Store
}

func (f *runsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who, ok := fakeTokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok || !(strings.Contains(r.URL.Path, "/history") || r.URL.Path == "/v1/usage") {
		f.fakeAPI.ServeHTTP(w, r)
		return
	}
	if f.store == nil {
		writeAPIError(w, http.StatusServiceUnavailable, "run records are not configured")
		return
	}
	answer := func(v any, err error) {
		if errors.Is(err, runs.ErrNotFound) {
			writeAPIError(w, http.StatusNotFound, "no run record")
			return
		}
		if err != nil {
			writeAPIError(w, http.StatusInternalServerError, err.Error())
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
	q := r.URL.Query()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/workspaces/{ws}/history", func(http.ResponseWriter, *http.Request) {
		answer(f.store.List(r.Context(), runs.Query{Workspaces: []string{who.Workspace}, Kind: runs.Kind(q.Get("kind")),
			Phase: q.Get("phase"), Name: q.Get("name"), Parent: q.Get("parent"), Checkpoint: q.Get("checkpoint"), After: q.Get("after"), Limit: 100}))
	})
	mux.HandleFunc("GET /v1/workspaces/{ws}/history/{kind}/{uid}", func(_ http.ResponseWriter, r *http.Request) {
		answer(f.store.Get(r.Context(), who.Workspace, runs.Kind(r.PathValue("kind")), r.PathValue("uid")))
	})
	mux.HandleFunc("GET /v1/usage", func(http.ResponseWriter, *http.Request) {
		to, _ := time.Parse(time.RFC3339, q.Get("to"))
		from, _ := time.Parse(time.RFC3339, q.Get("from"))
		rows, err := f.store.Usage(r.Context(), runs.UsageQuery{Workspaces: []string{who.Workspace}, From: from, To: to})
		answer(api.Usage{From: from, To: to, Rows: rows}, err)
	})
	if ws := pathWorkspace(r.URL.Path); ws != "" && ws != who.Workspace {
		writeAPIError(w, http.StatusNotFound, "workspace "+ws+" not found")
		return
	}
	mux.ServeHTTP(w, r)
}

// pathWorkspace is the {ws} of /v1/workspaces/{ws}/...
func pathWorkspace(p string) string {
	rest, ok := strings.CutPrefix(p, "/v1/workspaces/")
	if !ok {
		return ""
	}
	ws, _, _ := strings.Cut(rest, "/")
	return ws
}

const (
	expUID   = "1b7c8a52-3f4e-4c1d-9a2b-1c2d3e4f5a6b"
	trialUID = "2b7c8a52-3f4e-4c1d-9a2b-1c2d3e4f5a6b"
)

func runsStore(t *testing.T) *runsfake.Store {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(30*time.Minute), t0.Add(2*time.Hour)
	trial := 0
	s := &runsfake.Store{}
	for _, r := range []runs.Record{
		{Workspace: "a", Kind: runs.KindExperiment, Name: "sweep", UID: expUID, Phase: "Succeeded", Started: &t0, Finished: t2,
			Origin: runs.Origin{Kind: runs.OriginSchedule, Name: "nightly"}, Metrics: map[string]float64{"loss": 0.125}},
		{Workspace: "a", Kind: runs.KindJob, Name: "sweep-0", UID: trialUID, Phase: "Failed", Reason: "OOMKilled", Parent: expUID,
			Origin: runs.Origin{Kind: runs.OriginExperiment, Name: "sweep", Trial: &trial}, Started: &t0, Finished: t2,
			Inputs: []string{"s3://data/imagenet"}, Checkpoint: "s3://ckpt/sweep-0/step-9", Demand: runs.Demand{GPU: 2, CPU: 4, MemoryBytes: 8 << 30},
			Metrics: map[string]float64{"loss": 0.5, "acc": 0.75},
			Attempts: []runs.Attempt{
				{Attempt: 1, Start: t0, End: &t1, Outcome: "Restarting", Reason: "NodeLost", Nodes: []string{"node-7"}},
				{Attempt: 2, Start: t1, End: &t2, Outcome: "Failed", Reason: "OOMKilled", Nodes: []string{"node-9"}, ResumedFrom: "s3://ckpt/sweep-0/step-4"},
			}},
		{Workspace: "b", Kind: runs.KindJob, Name: "bs-secret-run", UID: trialUID, Phase: "Succeeded", Finished: t2},
	} {
		if _, err := s.Put(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func startRunsConsole(t *testing.T, store *runsfake.Store) string {
	t.Helper()
	srv := httptest.NewServer(Mount(&runsAPI{fakeAPI: fakeAPI{revoked: map[string]bool{}}, store: store}, Options{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The history page lists the workspace's records with its filters; a record's page
// shows its attempts, metrics and lineage, and an experiment's its trials. Another
// workspace's history and records are the API's 404.
func TestHistoryPages(t *testing.T) {
	base := startRunsConsole(t, runsStore(t))
	c := browserish(t)
	signIn(t, c, base, "tok-a")
	get := func(path string) (int, string) {
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(t, resp)
	}
	code, body := get("/ui/ws/a/history")
	if code != http.StatusOK || !contains(body, `data-uid="`+expUID+`"`, `data-uid="`+trialUID+`"`, "Schedule/nightly", "Experiment/sweep",
		`href="/ui/ws/a/history/TrainingJob/`+trialUID+`"`, `aria-current="page">History`) || strings.Contains(body, "bs-secret-run") {
		t.Fatalf("a's history: %d %s", code, body)
	}
	code, body = get("/ui/ws/a/history?kind=TrainingJob&phase=Failed&name=sweep-0")
	if code != http.StatusOK || !contains(body, `data-uid="`+trialUID+`"`, "<option selected>Failed</option>") || strings.Contains(body, `data-uid="`+expUID+`"`) {
		t.Fatalf("filtered history: %d %s", code, body)
	}

	code, body = get("/ui/ws/a/history/TrainingJob/" + trialUID)
	if code != http.StatusOK || !contains(body, `data-attempt="1"`, `data-attempt="2"`, "NodeLost", "node-9", "s3://ckpt/sweep-0/step-4",
		`data-metric="acc"`, "0.75", "s3://data/imagenet", "s3://ckpt/sweep-0/step-9", "Experiment/sweep", "(trial 0)",
		`href="/ui/ws/a/history/Experiment/`+expUID+`"`, "OOMKilled", "2 GPUs") {
		t.Fatalf("the trial's record: %d %s", code, body)
	}
	// The checkpoint links to its lineage: the runs that wrote or read under it.
	if !contains(body, `href="/ui/ws/a/history?checkpoint=s3%3a%2f%2fckpt%2fsweep-0%2fstep-9"`) {
		t.Fatalf("the checkpoint does not link to its lineage: %s", body)
	}
	code, body = get("/ui/ws/a/history?checkpoint=" + url.QueryEscape("s3://data/imagenet"))
	if code != http.StatusOK || !contains(body, `id="lineage-of"`, `data-uid="`+trialUID+`"`) || strings.Contains(body, `data-uid="`+expUID+`"`) {
		t.Fatalf("the runs that read s3://data/imagenet: %d %s", code, body)
	}
	code, body = get("/ui/ws/a/history/Experiment/" + expUID)
	if code != http.StatusOK || !contains(body, `id="children"`, `data-uid="`+trialUID+`"`, "sweep-0") {
		t.Fatalf("the experiment's record: %d %s", code, body)
	}

	for _, p := range []string{"/ui/ws/b/history", "/ui/ws/b/history/TrainingJob/" + trialUID, "/ui/ws/a/history/Pipeline/" + expUID} {
		if code, body := get(p); code != http.StatusNotFound || strings.Contains(body, "bs-secret-run") {
			t.Errorf("%s: %d %s, want the API's 404", p, code, body)
		}
	}
}

// The usage page sums the workspace's attempts per day over the range asked; a bad
// date names the field.
func TestUsagePage(t *testing.T) {
	store := runsStore(t)
	base := startRunsConsole(t, store)
	c := browserish(t)
	signIn(t, c, base, "tok-a")
	resp, err := c.Get(base + "/ui/ws/a/usage?from=2026-02-20&to=2026-03-05")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	// The trial ran 2 h with 2 GPUs, 4 cores and 8 GiB; the experiment has no attempts.
	if resp.StatusCode != http.StatusOK || !contains(body, `data-day="2026-03-01"`, "<td>4.00</td><td>8.00</td><td>16.00</td><td>1</td>",
		`id="usage-total"`, `value="2026-02-20"`) {
		t.Fatalf("usage page: %d %s", resp.StatusCode, body)
	}
	q := store.UsageQueries[len(store.UsageQueries)-1]
	if len(q.Workspaces) != 1 || q.Workspaces[0] != "a" || !q.From.Equal(time.Date(2026, 2, 20, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("usage asked %+v", q)
	}
	resp, err = c.Get(base + "/ui/ws/a/usage?from=last-week")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || !contains(body, "from", "YYYY-MM-DD") {
		t.Fatalf("a bad date: %d %s", resp.StatusCode, body)
	}
}

// A server without run records: the pages say so instead of failing.
func TestHistoryPagesWithoutRunRecords(t *testing.T) {
	base := startRunsConsole(t, nil)
	c := browserish(t)
	signIn(t, c, base, "tok-a")
	for _, p := range []string{"/ui/ws/a/history", "/ui/ws/a/usage"} {
		resp, err := c.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK || !contains(body, `id="runs-off"`, "run records are not configured") {
			t.Errorf("%s: %d %s", p, resp.StatusCode, body)
		}
	}
}
