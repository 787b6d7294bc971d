package workflows_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// decisionPost models how the Temporal server delivers the quota workflow's
// quota-decision signals: a signal is delivered once the server has answered it (its
// future is ready); one whose run closes first (continue-as-new included) is dropped,
// as the server's transfer task for it finds the sending run closed
// (ErrWorkflowCompleted) and gives up. The test environment would call the mock
// whatever happens, so delivery is read from the futures instead.
type decisionPost struct {
	interceptor.WorkerInterceptorBase
	mu   sync.Mutex
	sent []*postedDecision
}

type postedDecision struct {
	job     string
	granted bool
	f       workflow.Future
	// seen is set once the test has taken the delivery in; lost once the run closed
	// without delivering it.
	seen, lost bool
}

func (p *decisionPost) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != workflows.QuotaWorkflowName {
		return next
	}
	return &postInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, p: p}
}

type postInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	p *decisionPost
}

func (i *postInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&postOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, p: i.p})
}

type postOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	p *decisionPost
}

func (o *postOutbound) SignalExternalWorkflow(ctx workflow.Context, id, runID, name string, arg any) workflow.Future {
	f := o.Next.SignalExternalWorkflow(ctx, id, runID, name, arg)
	if name == workflows.SignalQuotaDecision {
		d, _ := arg.(workflows.QuotaDecision)
		o.p.mu.Lock()
		o.p.sent = append(o.p.sent, &postedDecision{job: id, granted: d.Granted, f: f})
		o.p.mu.Unlock()
	}
	return f
}

// delivered returns the jobs granted by a signal delivered since the last call. With
// closed, the run has ended: what it had not delivered is lost.
func (p *decisionPost) delivered(closed bool) (granted []string, lost int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sent {
		switch {
		case s.seen || s.lost:
		case s.f.IsReady():
			s.seen = true
			if s.granted {
				granted = append(granted, s.job)
			}
		case closed:
			s.lost = true
			lost++
		}
	}
	return granted, lost
}

// Issue 33, finding 8: after a flood of submissions a workspace's quota wedged, with
// jobs counted as admitted that never learnt it. 200 jobs of 1 GPU each ask a 2-GPU
// quota at once; a job told it is admitted (by its request's answer or by a delivered
// quota-decision signal) holds its GPU for 2 minutes, then releases it. The quota's
// history bound is lowered to 600 events so that it continues as new every few
// admissions. Every job must be admitted, told so exactly once, and release, and the
// quota must end empty. Before the fix, the decisions signalled in the workflow task
// that continued as new were dropped: the test saw jobs admitted and never told, and
// the queue behind them stuck.
func TestQuotaFloodEveryJobLearnsItsAdmission(t *testing.T) {
	const (
		jobs = 200
		hold = 2 * time.Minute
		poll = 10 * time.Second
	)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := start.Add(12 * time.Hour) // the jobs need 100 × 2 minutes, 3 h 20 min
	job := func(i int) string { return fmt.Sprintf("dlc/ws/job/j%03d", i) }

	post := &decisionPost{}
	answered := map[string]bool{} // the job's request has been answered
	toldAt := map[string]time.Time{}
	told := map[string]int{}
	released := map[string]bool{}
	lost, runs := 0, 0
	var last *workflows.QuotaView

	state := workflows.QuotaView{Workspace: "ws", Limits: workflows.QuotaLimits{GPU: int64p(2)},
		HistoryBound: &workflows.HistoryBound{MaxEvents: 600}}
	now := start
	for runs < 500 {
		runs++
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		workers.RegisterWorkflows(env)
		workers.RegisterQuotaActivities(env, &activities.QuotaActivities{})
		returnActivity(env, quotaActs.ClosedJobs, []string{}, nil)
		env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalQuotaDecision, mock.Anything).Return(nil)
		env.SetStartTime(now)
		m := meterHistory(env, workflows.QuotaWorkflowName, state)
		env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{m, post}})

		tell := func(id string) {
			told[id]++
			toldAt[id] = env.Now()
		}
		// The jobs whose request was not answered yet ask (again: a job's quota request
		// is a local activity that retries until it is answered).
		env.RegisterDelayedCallback(func() {
			for i := range jobs {
				id := job(i)
				if answered[id] {
					continue
				}
				req := workflows.QuotaRequest{JobID: id, Resources: activities.QuotaAmounts{GPU: 1}}
				m.signalled(2, req)
				env.UpdateWorkflow(workflows.UpdateQuotaRequest, id+":quota", &testsuite.TestUpdateCallback{
					OnReject: func(error) {}, OnAccept: func() {},
					OnComplete: func(v any, err error) {
						d, _ := v.(workflows.QuotaDecision)
						if err != nil {
							return // asked again in the next run
						}
						answered[id] = true
						switch {
						case d.Rejected:
							t.Errorf("%s rejected: %s", id, d.Message)
						case d.Granted:
							tell(id)
						}
					},
				}, req)
			}
		}, time.Second)
		// Every poll: take in the delivered decisions, release the jobs done, and stop
		// once every job has released, or at the deadline.
		var tick func()
		tick = func() {
			granted, _ := post.delivered(false)
			for _, id := range granted {
				tell(id)
			}
			finished := len(released) == jobs // every release sent a poll ago
			for i := range jobs {
				id := job(i)
				if released[id] {
					continue
				}
				if at, ok := toldAt[id]; ok && env.Now().Sub(at) >= hold {
					released[id] = true
					rel := workflows.QuotaRelease{JobID: id}
					m.signalled(1, rel)
					env.SignalWorkflow(workflows.SignalQuotaRelease, rel)
				}
			}
			if finished || !env.Now().Before(deadline) {
				if v, err := env.QueryWorkflow(workflows.QueryQuota); err == nil {
					last = new(workflows.QuotaView)
					if err := v.Get(last); err != nil {
						t.Fatal(err)
					}
				}
				env.CancelWorkflow()
				return
			}
			env.RegisterDelayedCallback(tick, poll)
		}
		env.RegisterDelayedCallback(tick, poll)
		env.ExecuteWorkflow(workflows.QuotaWorkflowName, state)

		granted, dropped := post.delivered(true)
		for _, id := range granted {
			tell(id)
		}
		lost += dropped
		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); !errors.As(err, &can) {
			break
		}
		var next workflows.QuotaView
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
			t.Fatal(err)
		}
		state, now = next, env.Now()
	}

	var never, twice []string
	for i := range jobs {
		switch id := job(i); told[id] {
		case 0:
			never = append(never, id)
		case 1:
		default:
			twice = append(twice, id)
		}
	}
	t.Logf("%d jobs through a 2-GPU quota in %v (simulated): %d runs, %d decision signals dropped at a continue-as-new",
		jobs, now.Sub(start).Round(time.Minute), runs, lost)
	if runs < 5 {
		t.Errorf("the quota continued as new %d times: the test does not exercise continue-as-new", runs-1)
	}
	if lost > 0 {
		t.Errorf("%d decision signals were still undelivered when their run continued as new", lost)
	}
	if len(never) > 0 {
		t.Errorf("%d jobs never learnt they were admitted (first: %s)", len(never), never[0])
	}
	if len(twice) > 0 {
		t.Errorf("%d jobs told more than once (first: %s)", len(twice), twice[0])
	}
	if last == nil {
		t.Fatal("the quota was never queried at the end")
	}
	if len(last.Admitted) != 0 || len(last.Queue) != 0 || last.Used.GPU != 0 {
		var admitted []string
		for _, e := range last.Admitted {
			admitted = append(admitted, e.JobID)
		}
		t.Errorf("at the end: %d GPUs used by %v, %d queued; want none", last.Used.GPU, admitted, len(last.Queue))
	}
}
