package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
)

// request is what the test server saw.
type request struct {
	method, path, query, body, auth string
}

// recorder answers every request with status and answer, and records it.
func recorder(t *testing.T, status int, answer string) (*Client, *[]request) {
	t.Helper()
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, request{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Get("Authorization")})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	return c, &got
}

// DeleteExperiment sends DELETE to the experiment's path, as DeleteJob does to the job's.
func TestDeleteExperiment(t *testing.T) {
	c, got := recorder(t, http.StatusNoContent, "")
	ctx := context.Background()
	if err := c.DeleteExperiment(ctx, "ml", "tune"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteJob(ctx, "ml", "train"); err != nil {
		t.Fatal(err)
	}
	want := []request{
		{method: "DELETE", path: "/v1/workspaces/ml/experiments/tune", auth: "Bearer tok"},
		{method: "DELETE", path: "/v1/workspaces/ml/jobs/train", auth: "Bearer tok"},
	}
	if len(*got) != 2 || (*got)[0] != want[0] || (*got)[1] != want[1] {
		t.Errorf("requests %+v, want %+v", *got, want)
	}
}

func TestDeleteExperimentNotFound(t *testing.T) {
	c, _ := recorder(t, http.StatusNotFound, `{"error":{"code":"NotFound","message":"experiment ml/x not found"}}`)
	err := c.DeleteExperiment(context.Background(), "ml", "x")
	if !IsNotFound(err) || err.Error() != "experiment ml/x not found" {
		t.Errorf("err %v, want the server's not found", err)
	}
}

// The shared request code: paths, list queries, JSON bodies and decoded answers.
func TestRequests(t *testing.T) {
	c, got := recorder(t, http.StatusOK, `{"items":[{"name":"a"}],"phase":"Stopped"}`)
	ctx := context.Background()
	l, err := c.ListJobs(ctx, "ml", ListOptions{Phase: "Running", Framework: "pytorch", Labels: []string{"a=b"}, Limit: 5, PageToken: "p"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "a" {
		t.Fatalf("ListJobs: %v %+v", err, l)
	}
	if _, err := c.ListExperiments(ctx, "ml", ListOptions{Phase: "Running"}); err != nil {
		t.Fatal(err)
	}
	r, err := c.StopPipeline(ctx, "ml", "p", "why")
	if err != nil || r.Phase != "Stopped" {
		t.Fatalf("StopPipeline: %v %+v", err, r)
	}
	if _, err := c.ListSchedules(ctx, "ml", 0, "tok2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWorkspace(ctx, "ml"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetQuota(ctx, "ml", api.Quota{CPU: "4"}); err != nil {
		t.Fatal(err)
	}
	want := []request{
		{"GET", "/v1/workspaces/ml/jobs", "framework=pytorch&label=a%3Db&limit=5&pageToken=p&phase=Running", "", "Bearer tok"},
		{"GET", "/v1/workspaces/ml/experiments", "phase=Running", "", "Bearer tok"},
		{"POST", "/v1/workspaces/ml/pipelines/p/stop", "", `{"reason":"why"}`, "Bearer tok"},
		{"GET", "/v1/workspaces/ml/schedules", "pageToken=tok2", "", "Bearer tok"},
		{"GET", "/v1/workspaces/ml", "", "", "Bearer tok"},
		{"PUT", "/v1/workspaces/ml/quota", "", `{"cpu":"4"}`, "Bearer tok"},
	}
	if len(*got) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(*got), len(want), *got)
	}
	for i, w := range want {
		if (*got)[i] != w {
			t.Errorf("request %d: %+v, want %+v", i, (*got)[i], w)
		}
	}
}

// The Wait functions ask again while the server answers 503 (a killed worker is being
// replaced and Temporal cannot answer the status query), and stop at any other error.
func TestWaitAsksAgainWhileUnavailable(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/workspaces/ml/pipelines/bad":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"code":"Internal","message":"boom"}}`)
		case calls <= 2:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"Unavailable","message":"query pipeline: context deadline exceeded"}}`)
		default:
			_, _ = io.WriteString(w, `{"status":{"phase":"Succeeded"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitPipeline(context.Background(), "ml", "run", time.Millisecond, nil)
	if err != nil || p.Status.Phase != "Succeeded" || calls != 3 {
		t.Fatalf("WaitPipeline = %+v, %v after %d calls; want Succeeded after two 503s", p, err, calls)
	}
	if _, err := c.WaitPipeline(context.Background(), "ml", "bad", time.Millisecond, nil); err == nil {
		t.Fatal("WaitPipeline went on after a 500")
	}
}
