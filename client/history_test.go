package client

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/opendlc/opendlc/runs"
)

// The run record calls send their queries as the API names the parameters.
func TestHistoryRequests(t *testing.T) {
	c, got := recorder(t, 200, `{"records":[{"workspace":"ml","kind":"TrainingJob","name":"train","uid":"u1","phase":"Failed","origin":{"kind":"User"},"submitted":"2026-03-01T00:00:00Z","finished":"2026-03-01T01:00:00Z"}],"next":"c1"}`)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	page, err := c.History(ctx, "ml", HistoryQuery{Kind: runs.KindJob, Name: "train", Labels: []string{"team=cv", "tier=a"}, Phase: "Failed",
		FinishedAfter: t0, Origin: "Schedule/nightly", Parent: "p", Checkpoint: "s3://b/x", Limit: 5, After: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.Records[0].Name != "train" || page.Next != "c1" {
		t.Errorf("page %+v", page)
	}
	if _, err := c.HistoryRecord(ctx, "ml", runs.KindExperiment, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lineage(ctx, "ml", LineageQuery{Schedule: "nightly"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Usage(ctx, UsageQuery{Workspaces: []string{"a", "b"}, From: t0, GroupByLabel: "team"}); err != nil {
		t.Fatal(err)
	}
	want := []struct{ path string }{{"/v1/workspaces/ml/history"}, {"/v1/workspaces/ml/history/Experiment/u1"}, {"/v1/workspaces/ml/lineage"}, {"/v1/usage"}}
	wantQ := []url.Values{
		{"kind": {"TrainingJob"}, "name": {"train"}, "label": {"team=cv", "tier=a"}, "phase": {"Failed"}, "finishedAfter": {"2026-03-01T11:00:00Z"},
			"origin": {"Schedule/nightly"}, "parent": {"p"}, "checkpoint": {"s3://b/x"}, "limit": {"5"}, "after": {"c1"}},
		{},
		{"schedule": {"nightly"}},
		{"workspace": {"a", "b"}, "from": {"2026-03-01T11:00:00Z"}, "groupByLabel": {"team"}},
	}
	if len(*got) != len(want) {
		t.Fatalf("%d requests: %+v", len(*got), *got)
	}
	for i, r := range *got {
		q, _ := url.ParseQuery(r.query)
		if r.method != "GET" || r.path != want[i].path || q.Encode() != wantQ[i].Encode() {
			t.Errorf("request %d: %s %s?%s, want GET %s?%s", i, r.method, r.path, r.query, want[i].path, wantQ[i].Encode())
		}
	}
}
