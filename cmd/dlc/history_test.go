package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/runs"
)

// historyAPI answers the run record routes with fixed records and remembers the
// requests' URLs.
type historyAPI struct {
	mu   sync.Mutex
	urls []*url.URL
}

var (
	histT0      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	histStarted = histT0.Add(-90 * time.Minute)
	histEnd1    = histT0.Add(-time.Hour)
	histRecord  = runs.Record{Workspace: "ml", Kind: runs.KindJob, Name: "train", UID: "0b7c8a52-3f4e-4c1d-9a2b-1c2d3e4f5a6b",
		Phase: "Succeeded", Origin: runs.Origin{Kind: runs.OriginSchedule, Name: "nightly"}, Started: &histStarted, Finished: histT0,
		Checkpoint: "s3://ckpt/train/step-100", Inputs: []string{"s3://data/a", "s3://data/b"}, Metrics: map[string]float64{"loss": 0.25},
		Attempts: []runs.Attempt{
			{Attempt: 1, Start: histStarted, End: &histEnd1, Outcome: "Restarting", Reason: "NodeLost", Nodes: []string{"n1"}},
			{Attempt: 2, Start: histEnd1, End: &histT0, Outcome: "Succeeded", Nodes: []string{"n2"}, ResumedFrom: "s3://ckpt/train/step-50"},
		}}
)

func (h *historyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.urls = append(h.urls, r.URL)
	h.mu.Unlock()
	var v any
	switch r.URL.Path {
	case "/v1/workspaces/ml/history":
		v = runs.Page{Records: []runs.Record{histRecord}, Next: "c1"}
	case "/v1/workspaces/ml/history/TrainingJob/" + histRecord.UID:
		v = histRecord
	case "/v1/workspaces/ml/lineage":
		v = api.Lineage{Records: []runs.Record{histRecord}}
	case "/v1/usage":
		v = api.Usage{From: histT0.Add(-24 * time.Hour), To: histT0, Rows: []runs.UsageRow{
			{Workspace: "a", Day: "2026-02-28", Label: "cv", GPUHours: 8, CPUHours: 32, MemoryGiBHours: 128.5, Runs: 2},
			{Workspace: "b", Day: "2026-03-01", GPUHours: 1.5, CPUHours: 3, MemoryGiBHours: 4, Runs: 1},
		}}
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"NotFound","message":"no run record"}}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// dlcHistory runs the CLI against h, in workspace ml; it returns stdout, stderr, the last
// request's URL and the error.
func dlcHistory(t *testing.T, h *historyAPI, args ...string) (string, string, *url.URL, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	global := []string{"--server", srv.URL, "--token", "tok"}
	if args[0] != "usage" { // whose -w is its own, repeatable
		global = append(global, "-w", "ml")
	}
	root.SetArgs(append(global, args...))
	err := root.Execute()
	h.mu.Lock()
	defer h.mu.Unlock()
	var last *url.URL
	if len(h.urls) > 0 {
		last = h.urls[len(h.urls)-1]
	}
	h.urls = nil
	return out.String(), errOut.String(), last, err
}

func TestHistoryCommand(t *testing.T) {
	h := &historyAPI{}
	before := time.Now()
	out, errOut, u, err := dlcHistory(t, h, "history", "--kind", "job", "-l", "team=cv", "-l", "tier=a", "--since", "24h",
		"--until", "2026-03-02", "--phase", "Succeeded", "--origin", "Schedule/nightly", "--parent", "p", "--checkpoint", "s3://ckpt", "--limit", "1")
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, want := range map[string]string{"kind": "TrainingJob", "phase": "Succeeded", "origin": "Schedule/nightly", "parent": "p",
		"checkpoint": "s3://ckpt", "limit": "1", "finishedBefore": "2026-03-02T00:00:00Z"} {
		if q.Get(k) != want {
			t.Errorf("query %s=%q, want %q (%s)", k, q.Get(k), want, u.RawQuery)
		}
	}
	if strings.Join(q["label"], ",") != "team=cv,tier=a" {
		t.Errorf("labels %v", q["label"])
	}
	after, err := time.Parse(time.RFC3339Nano, q.Get("finishedAfter"))
	if err != nil || after.Before(before.Add(-24*time.Hour-time.Second)) || after.After(time.Now().Add(-24*time.Hour)) {
		t.Errorf("--since 24h sent finishedAfter=%s", q.Get("finishedAfter"))
	}
	for _, want := range []string{"FINISHED", "KIND", "NAME", "UID", "PHASE", "ORIGIN", "DURATION", "ATTEMPTS",
		"2026-03-01T12:00:00Z", "TrainingJob", "train", histRecord.UID, "Succeeded", "Schedule/nightly", "1h30m0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("history table lacks %q:\n%s", want, out)
		}
	}
	if fields := strings.Fields(strings.Split(out, "\n")[1]); fields[len(fields)-1] != "2" {
		t.Errorf("attempts column: %v, want 2", fields)
	}
	if !strings.Contains(errOut, "--after c1") {
		t.Errorf("no hint of the next page: %q", errOut)
	}

	out, _, _, err = dlcHistory(t, h, "history", "-o", "json", "--after", "c1")
	var page runs.Page
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Records) != 1 || page.Next != "c1" {
		t.Errorf("history -o json: %v\n%s", err, out)
	}

	// history get prints the whole record, YAML by default.
	out, _, u, err = dlcHistory(t, h, "history", "get", "job", histRecord.UID)
	if err != nil || u.Path != "/v1/workspaces/ml/history/TrainingJob/"+histRecord.UID {
		t.Fatalf("history get: %v, asked %v", err, u)
	}
	for _, want := range []string{"name: train", "attempts:", "reason: NodeLost", "resumedFrom: s3://ckpt/train/step-50", "loss: 0.25", "checkpoint: s3://ckpt/train/step-100"} {
		if !strings.Contains(out, want) {
			t.Errorf("history get lacks %q:\n%s", want, out)
		}
	}
	_, _, _, err = dlcHistory(t, h, "history", "get", "job", "0b7c8a52-0000-4c1d-9a2b-1c2d3e4f5a6b")
	if err == nil || !strings.Contains(err.Error(), "no run record") {
		t.Errorf("history get of no record: %v", err)
	}
}

// Bad flags are refused, naming the flag, before anything is asked.
func TestHistoryCommandBadFlags(t *testing.T) {
	h := &historyAPI{}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "--since", "yesterday"}, "--since"},
		{[]string{"history", "--until", "2026-13-01"}, "--until"},
		{[]string{"history", "--kind", "schedule"}, `kind "schedule"`},
		{[]string{"history", "get", "trial", "u"}, `kind "trial"`},
		{[]string{"lineage"}, "exactly one of --checkpoint and --schedule"},
		{[]string{"lineage", "--checkpoint", "s3://x", "--schedule", "n"}, "exactly one of --checkpoint and --schedule"},
		{[]string{"usage", "--from", "last week"}, "--from"},
	} {
		_, _, u, err := dlcHistory(t, h, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || u != nil {
			t.Errorf("dlc %s: %v (asked %v), want an error naming %s", strings.Join(c.args, " "), err, u, c.want)
		}
	}
}

func TestLineageCommand(t *testing.T) {
	h := &historyAPI{}
	out, _, u, err := dlcHistory(t, h, "lineage", "--checkpoint", "s3://ckpt/train/step-100")
	if err != nil || u.Query().Get("checkpoint") != "s3://ckpt/train/step-100" || u.Query().Has("schedule") {
		t.Fatalf("lineage: %v, asked %v", err, u)
	}
	for _, want := range []string{"CHECKPOINT", "INPUTS", "s3://ckpt/train/step-100", "s3://data/a,s3://data/b"} {
		if !strings.Contains(out, want) {
			t.Errorf("lineage table lacks %q:\n%s", want, out)
		}
	}
	_, _, u, err = dlcHistory(t, h, "lineage", "--schedule", "nightly")
	if err != nil || u.Query().Get("schedule") != "nightly" {
		t.Errorf("lineage --schedule: %v, asked %v", err, u)
	}
}

// dlc usage sends each -w, the range and the label; its table has a row a day and a
// total.
func TestUsageCommand(t *testing.T) {
	h := &historyAPI{}
	out, _, u, err := dlcHistory(t, h, "usage", "-w", "a", "--workspace", "b", "--from", "2026-02-01", "--to", "2026-03-01T00:00:00Z", "--by-label", "team")
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if strings.Join(q["workspace"], ",") != "a,b" || q.Get("from") != "2026-02-01T00:00:00Z" || q.Get("to") != "2026-03-01T00:00:00Z" || q.Get("groupByLabel") != "team" {
		t.Errorf("usage asked %s", u.RawQuery)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"DAY", "WORKSPACE", "TEAM", "GPU-H", "CPU-H", "GIB-H", "RUNS"},
		{"2026-02-28", "a", "cv", "8.00", "32.00", "128.50", "2"},
		{"2026-03-01", "b", "-", "1.50", "3.00", "4.00", "1"},
		{"TOTAL", "9.50", "35.00", "132.50"},
	}
	if len(lines) != len(want) {
		t.Fatalf("usage table:\n%s", out)
	}
	for i, l := range lines {
		if got := strings.Fields(l); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("usage line %d: %q, want %q", i, got, want[i])
		}
	}
	// Without -w the server chooses (the token's workspace): none is sent, not the
	// global default workspace.
	_, _, u, err = dlcHistory(t, h, "usage")
	if err != nil || u.Query().Has("workspace") || u.Query().Has("from") {
		t.Errorf("plain usage: %v, asked %s", err, u.RawQuery)
	}
}
