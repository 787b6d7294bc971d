package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// The self-healing workflow re-checks quarantined nodes every interval, publishes one
// node-health event per released node, and continues as new with its counters after
// an hour of rounds.
func TestNodeHealthWorkflowPublishesReleasesAndContinuesAsNew(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	workers.RegisterWorkflows(env)
	workers.RegisterActivities(env, &activities.JobActivities{})

	since := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	checked := since.Add(10 * time.Minute)
	calls := 0
	var timeouts []time.Duration
	onActivity(env, jobActs.RecheckQuarantined, func(_ context.Context, in activities.RecheckQuarantinedInput) (activities.RecheckQuarantinedResult, error) {
		calls++
		timeouts = append(timeouts, in.ProbeTimeout)
		switch calls {
		case 1:
			return activities.RecheckQuarantinedResult{Nodes: []backend.NodeHealth{
				{Node: "gpu-1.example.internal", Healthy: true, Reason: backend.ReasonChecksPassed, CheckedAt: checked, QuarantinedAt: &since,
					Checks: []events.HealthCheck{{Name: backend.CheckProbe, OK: true}}},
				{Node: "gpu-2", Reason: backend.ReasonProbeFailed, CheckedAt: checked, Quarantined: true, QuarantinedAt: &since},
			}, Released: []string{"gpu-1.example.internal"}}, nil
		case 2, 3, 4: // the second round fails, each of its three attempts
			return activities.RecheckQuarantinedResult{}, errors.New("apiserver unavailable")
		}
		return activities.RecheckQuarantinedResult{Nodes: []backend.NodeHealth{}}, nil
	})
	var published []events.Msg
	onActivityErr(env, jobActs.PublishEvents, func(_ context.Context, in activities.PublishEventsInput) error {
		published = append(published, in.Msgs...)
		return nil
	})
	var mid workflows.NodeHealthState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.QueryNodeHealth)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		if err := v.Get(&mid); err != nil {
			t.Error(err)
		}
	}, 90*time.Second) // after the second round (at 1m), before the third (at 2m)

	env.ExecuteWorkflow(workflows.NodeHealthWorkflowName, workflows.NodeHealthState{ProbeTimeout: 30 * time.Second})

	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new", err)
	}
	if can.WorkflowType.Name != workflows.NodeHealthWorkflowName {
		t.Errorf("continued as %q", can.WorkflowType.Name)
	}
	var carried workflows.NodeHealthState
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &carried); err != nil {
		t.Fatal(err)
	}
	if carried.Rounds != 60 || carried.Released != 1 || carried.ProbeTimeout != 30*time.Second || carried.LastError != "" {
		t.Errorf("state carried over: %+v", carried)
	}
	if calls != 62 {
		t.Errorf("%d activity calls before continuing as new, want 62 (60 rounds, one failing thrice)", calls)
	}
	if timeouts[0] != 30*time.Second {
		t.Errorf("probe timeout %s, want the state's 30s", timeouts[0])
	}
	if mid.Rounds != 2 || mid.Released != 1 || mid.LastError != "apiserver unavailable" || len(mid.LastNodes) != 2 {
		t.Errorf("state after two rounds: %+v", mid)
	}

	if len(published) != 1 {
		t.Fatalf("published %d events, want 1 (the release): %+v", len(published), published)
	}
	m := published[0]
	wantID := "node:gpu-1.example.internal:healthy:" + itoa(since.Unix())
	if m.ID != wantID || m.Subject != "dlc.system.node.gpu-1_example_internal.health" {
		t.Errorf("event id %q subject %q, want %q on dlc.system.node.gpu-1_example_internal.health", m.ID, m.Subject, wantID)
	}
	ev, d, err := decodeEvent[events.NodeHealthData](m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != events.TypeNodeHealth || ev.ID != m.ID || ev.Workspace != "system" || !ev.Time.Equal(checked) {
		t.Errorf("envelope %+v", ev)
	}
	if diff := cmp.Diff(events.NodeHealthData{Node: "gpu-1.example.internal", Status: "Healthy",
		Checks: []events.HealthCheck{{Name: backend.CheckProbe, OK: true}}}, d); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A node-health event's id depends only on the fact it reports: a quarantine (and its
// release) by when the quarantine began, so a retried check publishes the same id.
func TestNodeHealthEventIDs(t *testing.T) {
	since := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	at := since.Add(time.Hour)
	tests := map[string]struct {
		h       backend.NodeHealth
		job     string
		want    string
		wantSt  string
		subject string
	}{
		"quarantined by a job's check": {h: backend.NodeHealth{Node: "n1", Quarantined: true, QuarantinedAt: &since, CheckedAt: at, Reason: backend.ReasonGPUsLost},
			job: "llama", want: "node:n1:quarantined:" + itoa(since.Unix()), wantSt: "Quarantined"},
		"released": {h: backend.NodeHealth{Node: "n1", Healthy: true, QuarantinedAt: &since, CheckedAt: at},
			want: "node:n1:healthy:" + itoa(since.Unix()), wantSt: "Healthy"},
		"healthy in a job's check": {h: backend.NodeHealth{Node: "n1", Healthy: true, CheckedAt: at}, job: "llama",
			want: "node:n1:healthy:" + itoa(at.Unix()) + ":llama", wantSt: "Healthy"},
		"unhealthy, not quarantined": {h: backend.NodeHealth{Node: "n1", CheckedAt: at, Reason: backend.ReasonCordoned}, job: "llama",
			want: "node:n1:unhealthy:" + itoa(at.Unix()) + ":llama", wantSt: "Unhealthy"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := workflows.NodeHealthEvent(tt.h, tt.job)
			if err != nil {
				t.Fatal(err)
			}
			_, d, err := decodeEvent[events.NodeHealthData](m.Data)
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != tt.want || d.Status != tt.wantSt || d.Job != tt.job || m.Subject != "dlc.system.node.n1.health" {
				t.Errorf("id %q status %q job %q subject %q; want %q %q", m.ID, d.Status, d.Job, m.Subject, tt.want, tt.wantSt)
			}
		})
	}
}

// decodeEvent decodes a published event's envelope and its data as T.
func decodeEvent[T any](data []byte) (events.Event, T, error) {
	var ev events.Event
	var d T
	if err := json.Unmarshal(data, &ev); err != nil {
		return ev, d, err
	}
	err := json.Unmarshal(ev.Data, &d)
	return ev, d, err
}
