package workflows_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

func int64p(v int64) *int64 { return new(v) }

// The quota admits jobs in priority order, first come first served within a priority,
// never lets a job overtake the head of the queue, rejects a job larger than the whole
// quota, and admits the queue as shares are released.
func TestQuotaAdmitsByPriorityThenArrival(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	workers.RegisterWorkflows(env)
	workers.RegisterQuotaActivities(env, &activities.QuotaActivities{})
	returnActivity(env, quotaActs.ClosedJobs, []string{}, nil)

	var signalled []string
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalQuotaDecision, mock.Anything).Return(
		func(_, id, _, _ string, arg any) error {
			if d, ok := arg.(workflows.QuotaDecision); ok && d.Granted {
				signalled = append(signalled, id)
			}
			return nil
		})

	decisions := map[string]workflows.QuotaDecision{}
	request := func(updateID, id string, prio int32, gpu int64) {
		env.UpdateWorkflow(workflows.UpdateQuotaRequest, updateID, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("request %s rejected: %v", id, err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("request %s: %v", id, err)
					return
				}
				decisions[updateID] = v.(workflows.QuotaDecision)
			},
		}, workflows.QuotaRequest{JobID: id, Priority: prio, Resources: activities.QuotaAmounts{GPU: gpu}})
	}
	var mid, end workflows.QuotaView
	query := func(into *workflows.QuotaView) {
		v, err := env.QueryWorkflow(workflows.QueryQuota)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Get(into); err != nil {
			t.Fatal(err)
		}
	}
	env.RegisterDelayedCallback(func() {
		request("a", "a", 0, 8)
		request("b", "b", 0, 4)
		request("c", "c", 5, 4)
		request("d", "d", 0, 16)
		request("b-again", "b", 0, 4) // a job asking again keeps its place
	}, time.Second)
	env.RegisterDelayedCallback(func() { query(&mid) }, 1500*time.Millisecond)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalQuotaRelease, workflows.QuotaRelease{JobID: "a"})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		query(&end)
		env.CancelWorkflow()
	}, 3*time.Second)
	env.ExecuteWorkflow(workflows.QuotaWorkflowName, workflows.QuotaView{
		Workspace: "ws", Limits: workflows.QuotaLimits{GPU: int64p(8)},
	})

	if !decisions["a"].Granted {
		t.Errorf("a (8 of 8 GPUs free): %+v, want granted", decisions["a"])
	}
	if d := decisions["b"]; d.Granted || d.Position != 1 {
		t.Errorf("b: %+v, want queued first", d)
	}
	if d := decisions["b-again"]; d.Granted || d.Position != 2 {
		t.Errorf("b asking again: %+v, want queued second (c has a higher priority)", d)
	}
	if d := decisions["c"]; d.Granted || d.Position != 1 {
		t.Errorf("c: %+v, want queued first", d)
	}
	if d := decisions["d"]; !d.Rejected {
		t.Errorf("d (16 GPUs, quota 8): %+v, want rejected", d)
	}
	queued := func(v workflows.QuotaView) (ids []string) {
		for _, e := range v.Queue {
			ids = append(ids, e.JobID)
		}
		return ids
	}
	if diff := cmp.Diff([]string{"c", "b"}, queued(mid)); diff != "" {
		t.Errorf("queue before the release (-want +got):\n%s", diff)
	}
	if mid.Used.GPU != 8 {
		t.Errorf("used before the release: %d GPUs, want 8", mid.Used.GPU)
	}
	// Signals to two workflows are not ordered: each job is told once; the admission
	// order is the order of the admitted list.
	slices.Sort(signalled)
	if diff := cmp.Diff([]string{"b", "c"}, signalled); diff != "" {
		t.Errorf("jobs told they were admitted (-want +got):\n%s", diff)
	}
	var admitted []string
	for _, e := range end.Admitted {
		admitted = append(admitted, e.JobID)
	}
	if diff := cmp.Diff([]string{"c", "b"}, admitted); diff != "" {
		t.Errorf("admission order after the release (-want +got):\n%s", diff)
	}
	if len(end.Queue) != 0 || end.Used.GPU != 8 || len(end.Admitted) != 2 {
		t.Errorf("after the release: used %d, admitted %d, queued %d; want 8, 2, 0", end.Used.GPU, len(end.Admitted), len(end.Queue))
	}
}

// An admitted job that ends without releasing (terminated) gives its share back at the
// next sweep.
func TestQuotaSweepReleasesClosedJobs(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	workers.RegisterWorkflows(env)
	workers.RegisterQuotaActivities(env, &activities.QuotaActivities{})
	returnActivity(env, quotaActs.ClosedJobs, []string{"gone"}, nil)
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalQuotaDecision, mock.Anything).Return(nil)
	var d workflows.QuotaDecision
	var end workflows.QuotaView
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.UpdateQuotaRequest, "gone", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Error(err) }, OnAccept: func() {},
			OnComplete: func(v any, _ error) { d, _ = v.(workflows.QuotaDecision) },
		}, workflows.QuotaRequest{JobID: "gone", Resources: activities.QuotaAmounts{GPU: 4}})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.QueryQuota)
		if err == nil {
			err = v.Get(&end)
		}
		if err != nil {
			t.Error(err)
		}
		env.CancelWorkflow()
	}, 3*time.Minute)
	env.ExecuteWorkflow(workflows.QuotaWorkflowName, workflows.QuotaView{
		Workspace: "ws", Limits: workflows.QuotaLimits{GPU: int64p(8)},
	})
	if !d.Granted {
		t.Fatalf("decision %+v, want granted", d)
	}
	if end.Used.GPU != 0 || len(end.Admitted) != 0 {
		t.Errorf("after the sweep: used %d GPUs by %d jobs, want none", end.Used.GPU, len(end.Admitted))
	}
}
