package notify_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// TestMatchReasonsAndNames: rules that match on the reason and on experiment, pipeline
// and schedule names receive exactly the events of those, read from the real stream.
func TestMatchReasonsAndNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcs := map[string]*receiver{}
	d := e.start()
	rules := map[string]schemas.NotificationMatch{
		"hang":     {Reasons: []string{"Hang"}},
		"nightly":  {Pipelines: []string{"nightly"}, Phases: []schemas.JobPhase{schemas.JobFailed}},
		"tune":     {Experiments: []string{"tune"}},
		"schedule": {Schedules: []string{"every-night"}},
	}
	for name, m := range rules {
		rcs[name] = newReceiver(t, ok)
		e.put(d, webhookRule("a", name, rcs[name].url(), func(r *schemas.NotificationRule) { r.Spec.Match = m }))
	}
	pub := func(id, typ, subject string, data any) string {
		ev, err := events.New(id, typ, "a", "/opendlc/workspaces/a", "x", time.Now(), data)
		if err != nil {
			t.Fatal(err)
		}
		return e.publish("a", subject, ev).id
	}
	jobHang := pub("j:1", events.TypeJobPhase, events.JobStatusSubject("a", "train"),
		events.JobPhaseData{Job: "train", Phase: "Failed", Reason: "Hang"})
	pub("j:2", events.TypeJobPhase, events.JobStatusSubject("a", "train"),
		events.JobPhaseData{Job: "train", Phase: "Failed", Reason: "QuotaExceeded"})
	nightlyStep := pub("p:1", events.TypePipelinePhase, events.PipelineStatusSubject("a", "nightly"),
		events.PipelinePhaseData{Pipeline: "nightly", Step: "train", Job: "nightly-train-0", Phase: "Failed", Reason: "Hang"})
	pub("p:2", events.TypePipelinePhase, events.PipelineStatusSubject("a", "nightly"),
		events.PipelinePhaseData{Pipeline: "nightly", Phase: "Running"})
	pub("p:3", events.TypePipelinePhase, events.PipelineStatusSubject("a", "weekly"),
		events.PipelinePhaseData{Pipeline: "weekly", Phase: "Failed"})
	tuneDone := pub("x:1", events.TypeExperimentPhase, events.ExperimentStatusSubject("a", "tune"),
		events.ExperimentPhaseData{Experiment: "tune", Phase: "Succeeded"})
	tuneTrial := pub("x:2", events.TypeExperimentTrial, events.ExperimentTrialSubject("a", "tune"),
		events.TrialData{Experiment: "tune", Trial: "3", Phase: "Succeeded"})
	pub("x:3", events.TypeExperimentPhase, events.ExperimentStatusSubject("a", "other"),
		events.ExperimentPhaseData{Experiment: "other", Phase: "Succeeded"})
	// A job named like the experiment is not the experiment.
	pub("j:3", events.TypeJobPhase, events.JobStatusSubject("a", "tune"), events.JobPhaseData{Job: "tune", Phase: "Failed"})
	run := pub("s:1", events.TypeScheduleRun, events.ScheduleRunSubject("a", "every-night"),
		events.ScheduleRunData{Schedule: "every-night", Action: "Started", Target: "nightly"})
	pub("s:2", events.TypeScheduleRun, events.ScheduleRunSubject("a", "weekly"),
		events.ScheduleRunData{Schedule: "weekly", Action: "Started"})
	e.waitProcessed("a")

	want := map[string][]string{
		"hang":     {jobHang, nightlyStep},
		"nightly":  {nightlyStep},
		"tune":     {tuneDone, tuneTrial},
		"schedule": {run},
	}
	for name, ids := range want {
		got := rcs[name].delivered()
		slices.Sort(got)
		slices.Sort(ids)
		wantEqual(t, fmt.Sprintf("rule %s received", name), ids, got)
	}
}
