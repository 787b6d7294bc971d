package workflows_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

func expFloat(v float64) *float64 { return new(v) }

func expInt32(v int32) *int32 { return new(v) }

// testExperiment tunes lr (log scale), l2 and a categorical batch size of a simulated
// trainer whose accuracy is best near lr=0.3, l2=0 and batch size 32.
func testExperiment(mutate ...func(e *schemas.Experiment)) schemas.Experiment {
	e := schemas.Experiment{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindExperiment,
		Metadata:   schemas.ObjectMeta{Name: "tune", Workspace: "team", Labels: map[string]string{"owner": "ml"}},
		Spec: schemas.ExperimentSpec{
			SearchSpace: []schemas.ParameterSpec{
				{Name: "lr", Type: schemas.ParameterFloat, Min: new(0.01), Max: expFloat(3), Log: true},
				{Name: "l2", Type: schemas.ParameterFloat, Min: expFloat(0), Max: new(0.1)},
				{Name: "bs", Type: schemas.ParameterCategorical, Values: []schemas.CategoricalValue{"8", "32", "128"}},
			},
			Objective:   schemas.ObjectiveSpec{Metric: "accuracy", Direction: schemas.Maximize, StepMetric: "epoch"},
			Algorithm:   schemas.AlgorithmSpec{Name: schemas.AlgorithmTPE, Seed: 7, StartupTrials: expInt32(3)},
			MaxTrials:   10,
			Parallelism: 3,
			TrialTemplate: schemas.TrainingJobSpec{
				Framework: schemas.FrameworkCustom,
				Command:   []string{"trainer", "--lr", "${params.lr}", "--batch-size", "${params.bs}"},
				Env:       []schemas.EnvVar{{Name: "L2", Value: "${params.l2}"}},
				Roles:     map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
			},
		},
	}
	for _, m := range mutate {
		m(&e)
	}
	e.Default()
	return e
}

// accuracy is the simulated trainer's accuracy after an epoch.
func simAccuracy(params map[string]any, epoch int) float64 {
	lr, _ := params["lr"].(float64)
	l2, _ := params["l2"].(float64)
	bs, _ := params["bs"].(float64)
	q := 0.95 - 0.05*math.Pow(math.Log10(lr/0.3), 2) - l2 - math.Abs(math.Log2(bs/32))*0.01
	return q * (1 - math.Pow(0.5, float64(epoch)))
}

// simTrial is a simulated trial job.
type simTrial struct {
	job     schemas.TrainingJob
	params  map[string]any
	reports []float64
	comps   []map[string]float64
	stopped bool
}

// expHarness runs the Experiment workflow with every trial job simulated by a child
// workflow mock that "trains" for epochs epochs of epochTime each, reporting accuracy
// after each, and stops when the StopTrialJob activity is called for it.
type expHarness struct {
	env       *testsuite.TestWorkflowEnvironment
	epochs    int
	epochTime func(job string) time.Duration
	fail      func(job string) bool
	// diverge makes a job report a NaN objective at epoch 2.
	diverge func(job string) bool
	// value, when set, is what a job reports at epoch e instead of simAccuracy.
	value func(job string, e int) float64
	// components, when set, are the metrics of a weighted objective a job reports at
	// epoch e (instead of the objective).
	components func(job string, e int) map[string]float64

	mu          sync.Mutex
	trials      map[string]*simTrial
	order       []string // job names in start order
	running     int
	maxRunning  int
	stopCalls   []string
	events      []events.TrialData
	phases      []events.ExperimentPhaseData
	eventIDs    map[string]bool
	metricCalls int
}

func newExpHarness(t *testing.T) *expHarness {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	h := &expHarness{env: s.NewTestWorkflowEnvironment(), epochs: 5, trials: map[string]*simTrial{}, eventIDs: map[string]bool{},
		epochTime: func(string) time.Duration { return 10 * time.Second },
		fail:      func(string) bool { return false }, diverge: func(string) bool { return false }}
	h.env.SetTestTimeout(30 * time.Second)
	// The trial jobs are simulated by a workflow registered under the TrainingJob name
	// rather than by a mock: the test environment reports a mocked child as started
	// only once it has finished.
	h.env.RegisterWorkflowWithOptions(workflows.ExperimentWorkflow, workflow.RegisterOptions{Name: workflows.ExperimentWorkflowName})
	h.env.RegisterWorkflowWithOptions(h.trialJob, workflow.RegisterOptions{Name: workflows.TrainingJobWorkflowName})
	workers.RegisterActivities(h.env, &activities.JobActivities{})
	workers.RegisterExperimentActivities(h.env, &activities.ExperimentActivities{})
	onActivityErr(h.env, jobActs.PublishEvents, func(_ context.Context, in activities.PublishEventsInput) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, m := range in.Msgs {
			if h.eventIDs[m.ID] {
				t.Errorf("event %s published twice", m.ID)
			}
			h.eventIDs[m.ID] = true
			if ph, pd, err := decodeEvent[events.ExperimentPhaseData](m.Data); err == nil && ph.Type == events.TypeExperimentPhase {
				h.phases = append(h.phases, pd) // checked in phase_events_test.go
				continue
			}
			ev, d, err := decodeEvent[events.TrialData](m.Data)
			if err != nil {
				return err
			}
			if ev.Type != events.TypeExperimentTrial || m.Subject != "dlc.team.experiment.tune.trial" {
				t.Errorf("event %s type %s on %s", m.ID, ev.Type, m.Subject)
			}
			h.events = append(h.events, d)
		}
		return nil
	})
	onActivity(h.env, experimentActs.WatchTrialMetrics, func(_ context.Context, in activities.WatchTrialMetricsInput) (activities.WatchTrialMetricsResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.metricCalls++
		tr := h.trials[in.Job]
		res := activities.WatchTrialMetricsResult{LastSeq: in.AfterSeq}
		for i := int(in.AfterSeq); tr != nil && i < len(tr.reports); i++ {
			step := int64(i + 1)
			if len(in.Components) > 0 {
				for _, m := range in.Components {
					if v, ok := tr.comps[i][m]; ok {
						res.Components = append(res.Components, activities.MetricReport{Metric: m, Step: &step, Value: v})
					}
				}
				res.LastSeq = uint64(i + 1)
				continue
			}
			r := activities.MetricReport{Step: &step, Value: tr.reports[i]}
			if name := events.NonFiniteName(r.Value); name != "" { // as the activity reports it
				r.Value, r.NonFinite = 0, name
			}
			res.Reports = append(res.Reports, r)
			res.LastSeq = uint64(i + 1)
		}
		return res, nil
	}).After(3 * time.Second)
	onActivityErr(h.env, experimentActs.StopTrialJob, func(_ context.Context, in activities.StopTrialJobInput) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		job := in.WorkflowID[strings.LastIndex(in.WorkflowID, "/")+1:]
		h.stopCalls = append(h.stopCalls, job)
		if tr := h.trials[job]; tr != nil {
			tr.stopped = true
		}
		return nil
	})
	return h
}

// trialJob is the simulated TrainingJob workflow.
func (h *expHarness) trialJob(ctx workflow.Context, in workflows.TrainingJobInput) (workflows.TrainingJobResult, error) {
	name := in.Job.Metadata.Name
	tr := &simTrial{job: in.Job, params: in.Params}
	h.mu.Lock()
	h.trials[name] = tr
	h.order = append(h.order, name)
	h.running++
	h.maxRunning = max(h.maxRunning, h.running)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()
	for e := 1; e <= h.epochs; e++ {
		for left := h.epochTime(name); left > 0; left -= time.Second {
			if err := workflow.Sleep(ctx, min(time.Second, left)); err != nil {
				return workflows.TrainingJobResult{}, err
			}
			h.mu.Lock()
			stopped := tr.stopped
			h.mu.Unlock()
			if stopped {
				return workflows.TrainingJobResult{Status: schemas.JobStatus{Phase: schemas.JobStopped, Message: "stopped"}}, nil
			}
		}
		if h.fail(name) && e == 2 {
			return workflows.TrainingJobResult{Status: schemas.JobStatus{Phase: schemas.JobFailed, Message: "replica exited 1"}}, nil
		}
		acc := simAccuracy(in.Params, e)
		if h.value != nil {
			acc = h.value(name, e)
		}
		if h.diverge(name) && e == 2 {
			acc = math.NaN()
		}
		h.mu.Lock()
		tr.reports = append(tr.reports, acc)
		if h.components != nil {
			tr.comps = append(tr.comps, h.components(name, e))
		}
		h.mu.Unlock()
	}
	return workflows.TrainingJobResult{Status: schemas.JobStatus{Phase: schemas.JobSucceeded}}, nil
}

func (h *expHarness) execute(t *testing.T, e schemas.Experiment) {
	t.Helper()
	h.env.ExecuteWorkflow(workflows.ExperimentWorkflowName, workflows.ExperimentInput{Experiment: e})
}

func (h *expHarness) result(t *testing.T) schemas.ExperimentStatus {
	t.Helper()
	return workflowResult[workflows.ExperimentResult](t, h.env, "experiment").Status
}

// paramsOf lists each trial's parameters, in trial order.
func trialParams(st schemas.ExperimentStatus) []map[string]any {
	out := make([]map[string]any, len(st.Trials))
	for i, tr := range st.Trials {
		out[i] = tr.Params
	}
	return out
}

func TestExperimentRunsTrialsAndRecordsTheBest(t *testing.T) {
	h := newExpHarness(t)
	h.execute(t, testExperiment())
	st := h.result(t)

	if st.Phase != schemas.ExperimentSucceeded || st.Reason != "MaxTrialsReached" {
		t.Fatalf("phase %s/%s: %s", st.Phase, st.Reason, st.Message)
	}
	if len(st.Trials) != 10 || st.Completed != 10 || h.maxRunning != 3 {
		t.Errorf("%d trials, %d completed, at most %d at a time; want 10, 10, 3", len(st.Trials), st.Completed, h.maxRunning)
	}
	best := -1.0
	bestID := -1
	for i, tr := range st.Trials {
		want := workflows.TrialJobName("tune", i, 0)
		if tr.ID != i || tr.Job != want || tr.Phase != schemas.TrialCompleted || tr.Attempts != 1 {
			t.Errorf("trial %d: %+v, want job %s Completed", i, tr, want)
		}
		// The value is the last report; every epoch was recorded with its step.
		sim := h.trials[tr.Job]
		if tr.Value == nil || *tr.Value != sim.reports[len(sim.reports)-1] || len(tr.Reports) != 5 || tr.Step != 5 {
			t.Errorf("trial %d: value %v, %d reports, step %d; simulated %v", i, tr.Value, len(tr.Reports), tr.Step, sim.reports)
		}
		if *tr.Value > best {
			best, bestID = *tr.Value, i
		}
		// The job got its parameters in DLC_PARAMS (Params) and in its command and env.
		if diff := cmp.Diff(tr.Params, sim.params); diff != "" {
			t.Errorf("trial %d: params (-status +job):\n%s", i, diff)
		}
		lr, bs := tr.Params["lr"].(float64), tr.Params["bs"].(float64)
		if lr < 0.01 || lr > 3 || (bs != 8 && bs != 32 && bs != 128) {
			t.Errorf("trial %d: params out of the space: %v", i, tr.Params)
		}
		cmd := sim.job.Spec.Command
		if cmd[2] != fmt.Sprint(lr) || cmd[4] != fmt.Sprint(bs) || sim.job.Spec.Env[0].Value != fmt.Sprint(tr.Params["l2"]) {
			t.Errorf("trial %d: command %v env %v, params %v", i, cmd, sim.job.Spec.Env, tr.Params)
		}
		if diff := cmp.Diff(map[string]string{"owner": "ml", "experiment": "tune", "trial": strconv.Itoa(i)}, sim.job.Metadata.Labels); diff != "" {
			t.Errorf("trial %d: labels (-want +got):\n%s", i, diff)
		}
	}
	if st.BestTrial == nil || *st.BestTrial != bestID || *st.BestValue != best || st.BestParams["lr"] != st.Trials[bestID].Params["lr"] {
		t.Errorf("best = trial %v value %v, want trial %d value %v", st.BestTrial, st.BestValue, bestID, best)
	}
	if !strings.Contains(st.Message, fmt.Sprintf("best: trial %d", bestID)) {
		t.Errorf("message %q", st.Message)
	}
	// One Running and one Completed event per trial, in that order, each published once,
	// numbered per trial (seq 1 and 2), naming the trial by its number and its job.
	if len(h.events) != 20 {
		t.Errorf("%d trial events, want 20", len(h.events))
	}
	seen := map[int][]string{}
	for _, ev := range h.events {
		seen[ev.TrialID] = append(seen[ev.TrialID], fmt.Sprintf("%d:%s:%s", ev.Seq, ev.Phase, ev.Trial))
		if ev.Experiment != "tune" || (ev.Phase == "Completed") != (ev.Objective != nil) {
			t.Errorf("event %+v", ev)
		}
	}
	for _, tr := range st.Trials {
		if diff := cmp.Diff([]string{"1:Running:" + tr.Job, "2:Completed:" + tr.Job}, seen[tr.ID]); diff != "" {
			t.Errorf("events of trial %d (-want +got):\n%s", tr.ID, diff)
		}
		// The trials run for a while of workflow time: a trial's start is before its end.
		if tr.StartTime == nil || tr.FinishTime == nil || !tr.StartTime.Before(*tr.FinishTime) {
			t.Errorf("trial %d: start %v, finish %v", tr.ID, tr.StartTime, tr.FinishTime)
		}
	}
}

// The seed decides the first parallelism trials, whatever the timing; another seed
// gives other parameters. Later suggestions depend on what has finished when a slot
// frees (slot scheduling, experiment_slots.go), which the history records: replaying it
// gives the same trials (TestReplayRecordedHistories, experiment_slots.json).
func TestExperimentSuggestionsDependOnTheSeedAndOrder(t *testing.T) {
	run := func(seed int64, epochTime func(job string) time.Duration) []map[string]any {
		h := newExpHarness(t)
		h.epochTime = epochTime
		h.execute(t, testExperiment(func(e *schemas.Experiment) { e.Spec.Algorithm.Seed = seed }))
		st := h.result(t)
		if st.Completed != 10 {
			t.Fatalf("seed %d: %d trials completed", seed, st.Completed)
		}
		return trialParams(st)
	}
	even := func(string) time.Duration { return 10 * time.Second }
	// Trials take 3s to 30s an epoch depending on their number, so they finish out of order.
	uneven := func(job string) time.Duration {
		var id int
		_, _ = fmt.Sscanf(job, "tune-t%d", &id)
		return time.Duration(3+(id*7)%28) * time.Second
	}
	a, b, c := run(7, even), run(7, uneven), run(8, even)
	if diff := cmp.Diff(a[:3], b[:3]); diff != "" {
		t.Errorf("same seed, other timing: the first trials' params differ (-even +uneven):\n%s", diff)
	}
	if cmp.Equal(a, c) {
		t.Errorf("seeds 7 and 8 gave the same params: %v", a)
	}
}

// ASHA stops trials that are behind at a rung; a pruned trial's value is the one it had
// at the step where it was stopped, and its job was stopped.
func TestExperimentEarlyStoppingPrunesTrials(t *testing.T) {
	h := newExpHarness(t)
	h.epochs = 9
	h.execute(t, testExperiment(func(e *schemas.Experiment) {
		e.Spec.MaxTrials = 12
		e.Spec.Parallelism = 2
		e.Spec.Algorithm = schemas.AlgorithmSpec{Name: schemas.AlgorithmRandom, Seed: 3}
		e.Spec.EarlyStopping = schemas.EarlyStoppingSpec{Rule: schemas.EarlyStoppingASHA, MinResource: 1, ReductionFactor: 3}
	}))
	st := h.result(t)
	if st.Phase != schemas.ExperimentSucceeded || st.Pruned == 0 || st.Completed == 0 || st.Pruned+st.Completed != 12 {
		t.Fatalf("phase %s, %d pruned, %d completed: %s", st.Phase, st.Pruned, st.Completed, st.Message)
	}
	for _, tr := range st.Trials {
		if tr.Phase != schemas.TrialPruned {
			continue
		}
		sim := h.trials[tr.Job]
		if !sim.stopped && len(sim.reports) == h.epochs {
			// It finished before the stop reached it; it is still Pruned at its step.
			t.Logf("trial %d finished before its stop arrived", tr.ID)
		}
		if tr.Value == nil || *tr.Value != sim.reports[tr.Step-1] || tr.Reports[len(tr.Reports)-1].Step != tr.Step {
			t.Errorf("pruned trial %d: value %v at step %d, simulated %v", tr.ID, tr.Value, tr.Step, sim.reports)
		}
		if !strings.Contains(tr.Message, "stopped early at step") || int(tr.Step) >= h.epochs {
			t.Errorf("pruned trial %d: step %d message %q", tr.ID, tr.Step, tr.Message)
		}
		if tr.ID < 2 {
			t.Errorf("trial %d was pruned with nothing to compare with", tr.ID)
		}
	}
	if len(h.stopCalls) == 0 {
		t.Error("no job was stopped")
	}
	if *st.BestValue < 0.5 {
		t.Errorf("best value %v", *st.BestValue)
	}
}

// Reaching the goal stops the trials still running and ends the experiment.
func TestExperimentGoalEndsTheSearch(t *testing.T) {
	h := newExpHarness(t)
	h.epochTime = func(job string) time.Duration {
		if job == "tune-t0" {
			return time.Second
		}
		return 20 * time.Second
	}
	h.execute(t, testExperiment(func(e *schemas.Experiment) { e.Spec.Objective.Goal = new(0.1) }))
	st := h.result(t)
	if st.Phase != schemas.ExperimentSucceeded || st.Reason != "GoalReached" || !strings.Contains(st.Message, "trial 0 reached the goal") {
		t.Fatalf("phase %s/%s: %s", st.Phase, st.Reason, st.Message)
	}
	if len(st.Trials) != 3 || st.Trials[0].Phase != schemas.TrialCompleted {
		t.Fatalf("trials %+v", st.Trials)
	}
	for _, tr := range st.Trials[1:] {
		if tr.Phase != schemas.TrialStopped {
			t.Errorf("trial %d is %s, want Stopped", tr.ID, tr.Phase)
		}
	}
	if diff := cmp.Diff([]string{"tune-t1", "tune-t2"}, h.stopCalls, expSortStrings); diff != "" {
		t.Errorf("stopped jobs (-want +got):\n%s", diff)
	}
}

var expSortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

// A failed trial is retried once with the same parameters under a new job name; a
// trial that fails again counts, and more failures than maxFailedTrials fail the
// experiment.
func TestExperimentRetriesAndCountsFailedTrials(t *testing.T) {
	h := newExpHarness(t)
	h.fail = func(job string) bool {
		return job == "tune-t1" || strings.HasPrefix(job, "tune-t3") || strings.HasPrefix(job, "tune-t4")
	}
	h.execute(t, testExperiment(func(e *schemas.Experiment) {
		e.Spec.MaxFailedTrials = expInt32(1)
		e.Spec.Parallelism = 1
	}))
	st := h.result(t)
	if st.Phase != schemas.ExperimentFailed || st.Reason != "TooManyFailedTrials" {
		t.Fatalf("phase %s/%s: %s", st.Phase, st.Reason, st.Message)
	}
	want := []string{"tune-t0", "tune-t1", "tune-t1-r1", "tune-t2", "tune-t3", "tune-t3-r1", "tune-t4", "tune-t4-r1"}
	if diff := cmp.Diff(want, h.order); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(h.trials["tune-t1"].params, h.trials["tune-t1-r1"].params); diff != "" {
		t.Errorf("the retry has other params:\n%s", diff)
	}
	phases := []schemas.TrialPhase{}
	for _, tr := range st.Trials {
		phases = append(phases, tr.Phase)
	}
	if diff := cmp.Diff([]schemas.TrialPhase{"Completed", "Completed", "Completed", "Failed", "Failed"}, phases); diff != "" {
		t.Errorf("trial phases (-want +got):\n%s", diff)
	}
	if st.Trials[1].Attempts != 2 || st.Trials[3].Attempts != 2 || !strings.Contains(st.Trials[3].Message, "replica exited 1") {
		t.Errorf("trials %+v", st.Trials)
	}
}

// stop stops every running trial and leaves the experiment Stopped; resume runs the
// stopped trials again with the same parameters and carries on; extend raises maxTrials.
func TestExperimentStopResumeExtend(t *testing.T) {
	h := newExpHarness(t)
	update := func(name string, arg any, check func(workflows.ExperimentUpdateResult)) {
		h.env.UpdateWorkflow(name, name+"-1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("%s rejected: %v", name, err) },
			OnAccept: func() {},
			OnComplete: func(r any, err error) {
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				check(r.(workflows.ExperimentUpdateResult))
			},
		}, arg)
	}
	var stoppedView workflows.ExperimentView
	h.env.RegisterDelayedCallback(func() {
		update(workflows.UpdateStop, workflows.StopRequest{Reason: "lunch"}, func(r workflows.ExperimentUpdateResult) {
			if r.Phase != schemas.ExperimentStopped {
				t.Errorf("stop returned %s", r.Phase)
			}
		})
	}, 75*time.Second)
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryStatus)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Get(&stoppedView); err != nil {
			t.Fatal(err)
		}
		// Extend is refused below the current limit, accepted above it.
		h.env.UpdateWorkflow(workflows.UpdateExtend, "extend-low", &testsuite.TestUpdateCallback{
			OnReject:   func(error) {},
			OnAccept:   func() { t.Error("extend to 5 accepted") },
			OnComplete: func(any, error) {},
		}, workflows.ExtendRequest{MaxTrials: 5})
		update(workflows.UpdateExtend, workflows.ExtendRequest{MaxTrials: 12}, func(r workflows.ExperimentUpdateResult) {
			if r.MaxTrials != 12 || r.Phase != schemas.ExperimentStopped {
				t.Errorf("extend returned %+v", r)
			}
		})
		update(workflows.UpdateResume, workflows.ResumeRequest{}, func(r workflows.ExperimentUpdateResult) {
			if r.Phase != schemas.ExperimentRunning {
				t.Errorf("resume returned %s", r.Phase)
			}
		})
	}, time.Hour)
	h.execute(t, testExperiment())
	st := h.result(t)

	if stoppedView.Status.Phase != schemas.ExperimentStopped || stoppedView.Status.Reason != "StopRequested" || stoppedView.Status.Message != "lunch" {
		t.Fatalf("while stopped: %s/%s %q", stoppedView.Status.Phase, stoppedView.Status.Reason, stoppedView.Status.Message)
	}
	var stopped []int
	for _, tr := range stoppedView.Status.Trials {
		if tr.Phase == schemas.TrialStopped {
			stopped = append(stopped, tr.ID)
		}
		if tr.Phase == schemas.TrialRunning {
			t.Errorf("trial %d still Running while the experiment is Stopped", tr.ID)
		}
	}
	if len(stopped) == 0 {
		t.Fatal("no trial was stopped")
	}
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 12 || st.Completed != 12 || st.MaxTrials != 12 {
		t.Fatalf("after resume: %s, %d trials, %d completed, max %d", st.Phase, len(st.Trials), st.Completed, st.MaxTrials)
	}
	for _, id := range stopped {
		tr := st.Trials[id]
		if tr.Attempts != 2 || tr.Job != workflows.TrialJobName("tune", id, 1) {
			t.Errorf("stopped trial %d re-ran as %s (attempts %d)", id, tr.Job, tr.Attempts)
		}
		if diff := cmp.Diff(h.trials[workflows.TrialJobName("tune", id, 0)].params, h.trials[tr.Job].params); diff != "" {
			t.Errorf("trial %d re-ran with other params:\n%s", id, diff)
		}
	}
}

// A trial job that succeeds without reporting the objective failed.
func TestExperimentTrialWithoutObjectiveFails(t *testing.T) {
	h := newExpHarness(t)
	h.epochs = 0
	h.execute(t, testExperiment(func(e *schemas.Experiment) { e.Spec.MaxTrials = 2; e.Spec.MaxTrialRetries = expInt32(0) }))
	st := h.result(t)
	if st.Phase != schemas.ExperimentFailed || st.Reason != "NoTrialCompleted" || st.Failed != 2 {
		t.Fatalf("phase %s/%s, %d failed: %s", st.Phase, st.Reason, st.Failed, st.Message)
	}
	if !strings.Contains(st.Trials[0].Message, "succeeded without reporting accuracy") {
		t.Errorf("message %q", st.Trials[0].Message)
	}
}

// A trial whose objective turns NaN (a diverged trainer) fails at once, without a retry:
// its job is stopped, the NaN is not its value, and the other trials are ranked.
func TestExperimentNaNObjectiveFailsTheTrial(t *testing.T) {
	h := newExpHarness(t)
	h.diverge = func(job string) bool { return job == "tune-t1" }
	h.execute(t, testExperiment(func(e *schemas.Experiment) {
		e.Spec.MaxTrials = 4
		e.Spec.Parallelism = 2
		e.Spec.MaxTrialRetries = expInt32(2)
	}))
	st := h.result(t)
	if st.Phase != schemas.ExperimentSucceeded || st.Completed != 3 || st.Failed != 1 {
		t.Fatalf("phase %s/%s, %d completed, %d failed: %s", st.Phase, st.Reason, st.Completed, st.Failed, st.Message)
	}
	if sim := h.trials["tune-t1"]; sim == nil || !math.IsNaN(sim.reports[len(sim.reports)-1]) {
		t.Fatalf("trial 1 did not report NaN: %+v", sim)
	}
	tr := st.Trials[1]
	if tr.Phase != schemas.TrialFailed || tr.Attempts != 1 ||
		!strings.Contains(tr.Message, "failed objective: accuracy = NaN at step 2") {
		t.Errorf("trial 1: %s after %d attempts: %q", tr.Phase, tr.Attempts, tr.Message)
	}
	if tr.Value == nil || math.IsNaN(*tr.Value) || len(tr.Reports) != 1 {
		t.Errorf("trial 1 value %v, reports %+v: want its epoch-1 value only", tr.Value, tr.Reports)
	}
	if !slices.Contains(h.stopCalls, "tune-t1") || slices.Contains(h.order, "tune-t1-r1") {
		t.Errorf("stop calls %v, jobs %v: want tune-t1 stopped and not retried", h.stopCalls, h.order)
	}
	if st.BestTrial == nil || *st.BestTrial == 1 || st.BestValue == nil || math.IsNaN(*st.BestValue) {
		t.Errorf("best trial %v = %v", st.BestTrial, st.BestValue)
	}
	best := math.Inf(-1)
	for i, tr := range st.Trials {
		if i != 1 && *tr.Value > best {
			best = *tr.Value
		}
	}
	if *st.BestValue != best {
		t.Errorf("best value %v, want %v", *st.BestValue, best)
	}
}
