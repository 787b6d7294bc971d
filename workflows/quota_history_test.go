package workflows_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// quotaAction is a request or a release the test sends the quota workflow.
type quotaAction struct {
	at      time.Time
	job     string
	release bool
}

// A workspace quota of 2 GPUs serves a job every 20 minutes for 3 simulated days, each
// holding 1 GPU for 50 minutes (so a job often waits in the queue): the quota workflow
// continues as new whenever its history passes its bound, every run's history stays
// under 10,000 events and 10 MB, each run starts with the state the previous one
// ended with (as its status query shows), and every job is admitted exactly once.
func TestQuotaHistoryBoundedOverDays(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(3 * 24 * time.Hour)
	var actions []quotaAction
	for k := 0; start.Add(time.Duration(20*k) * time.Minute).Before(end.Add(-2 * time.Hour)); k++ {
		at := start.Add(time.Duration(20*k) * time.Minute)
		job := fmt.Sprintf("dlc/ws/job/j%03d", k)
		actions = append(actions, quotaAction{at: at, job: job}, quotaAction{at: at.Add(50 * time.Minute), job: job, release: true})
	}
	delivered := make([]bool, len(actions))
	granted := map[string]int{}
	queued := 0

	state := workflows.QuotaView{Workspace: "ws", Limits: workflows.QuotaLimits{GPU: int64p(2)}}
	now := start
	type quotaRun struct {
		events, bytes int
		first         *workflows.QuotaView
		carried       workflows.QuotaView
	}
	var runs []quotaRun
	var last workflows.QuotaView
	for len(runs) < 100 {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		workers.RegisterWorkflows(env)
		workers.RegisterQuotaActivities(env, &activities.QuotaActivities{})
		returnActivity(env, quotaActs.ClosedJobs, []string{}, nil)
		env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalQuotaDecision, mock.Anything).Return(
			func(_, id, _, _ string, arg any) error {
				if d, ok := arg.(workflows.QuotaDecision); ok && d.Granted {
					granted[id]++
				}
				return nil
			})
		env.SetStartTime(now)
		m := meterHistory(env, workflows.QuotaWorkflowName, state)
		run := quotaRun{}
		query := func() *workflows.QuotaView {
			v, err := env.QueryWorkflow(workflows.QueryQuota)
			if err != nil {
				t.Errorf("run %d: quota query: %v", len(runs), err)
				return nil
			}
			var view workflows.QuotaView
			if err := v.Get(&view); err != nil {
				t.Fatal(err)
			}
			return &view
		}
		if len(runs) > 0 {
			queryAtStart(env, workflows.QueryQuota, func(v converter.EncodedValue, err error) {
				run.first = new(workflows.QuotaView)
				if err == nil {
					err = v.Get(run.first)
				}
				if err != nil {
					t.Errorf("run %d: quota query at its start: %v", len(runs), err)
				}
			})
		}
		for i, a := range actions {
			if delivered[i] {
				continue
			}
			env.RegisterDelayedCallback(func() {
				delivered[i] = true
				if a.release {
					rel := workflows.QuotaRelease{JobID: a.job}
					m.signalled(1, rel)
					env.SignalWorkflow(workflows.SignalQuotaRelease, rel)
					return
				}
				req := workflows.QuotaRequest{JobID: a.job, Resources: activities.QuotaAmounts{GPU: 1}}
				m.signalled(2, req)
				env.UpdateWorkflow(workflows.UpdateQuotaRequest, a.job, &testsuite.TestUpdateCallback{
					OnReject: func(err error) { t.Errorf("request %s rejected: %v", a.job, err) },
					OnAccept: func() {},
					OnComplete: func(v any, err error) {
						d, _ := v.(workflows.QuotaDecision)
						switch {
						case err != nil || d.Rejected:
							t.Errorf("request %s: %+v, %v", a.job, d, err)
						case d.Granted:
							granted[a.job]++
						default:
							queued++
						}
					},
				}, req)
			}, max(a.at.Sub(now), 0))
		}
		env.RegisterDelayedCallback(func() {
			if v := query(); v != nil {
				last = *v
			}
			env.CancelWorkflow()
		}, end.Sub(now))
		env.ExecuteWorkflow(workflows.QuotaWorkflowName, state)

		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); errors.As(err, &can) {
			var next workflows.QuotaView
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			run.carried = next
			run.events, run.bytes = m.closed(next)
			runs = append(runs, run)
			state, now = next, env.Now()
			continue
		}
		run.events, run.bytes = m.closed(nil)
		runs = append(runs, run)
		break
	}

	maxEvents, maxBytes := 0, 0
	for i, r := range runs {
		maxEvents, maxBytes = max(maxEvents, r.events), max(maxBytes, r.bytes)
		if r.events >= historyEventsLimit || r.bytes >= historyBytesLimit {
			t.Errorf("run %d: %d events, %d bytes: want under %d events and %d bytes", i, r.events, r.bytes, historyEventsLimit, historyBytesLimit)
		}
		if i > 0 {
			if r.first == nil {
				t.Errorf("run %d: not queried at its start", i)
			} else if diff := cmp.Diff(runs[i-1].carried, *r.first); diff != "" {
				t.Errorf("run %d: state at its start differs from what run %d carried (-carried +got):\n%s", i, i-1, diff)
			}
		}
	}
	t.Logf("3 days, %d requests: %d runs, at most %d events and %d bytes in one run (metered); %d requests queued first",
		len(actions)/2, len(runs), maxEvents, maxBytes, queued)
	if len(runs) < 2 {
		t.Fatalf("the quota never continued as new (%d events)", runs[0].events)
	}
	if queued == 0 {
		t.Error("no request waited in the queue: the test does not exercise the queue")
	}
	for i, a := range actions {
		if !delivered[i] {
			t.Errorf("%+v was never delivered", a)
		}
		if !a.release && granted[a.job] != 1 {
			t.Errorf("%s admitted %d times, want once", a.job, granted[a.job])
		}
	}
	if last.Used.GPU != 0 || len(last.Admitted) != 0 || len(last.Queue) != 0 {
		t.Errorf("at the end: %d GPUs used by %d jobs, %d queued; want none", last.Used.GPU, len(last.Admitted), len(last.Queue))
	}
}
