package workflows_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

const retriesDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: rt, workspace: team}
spec:
  steps:
    - name: flaky
      retries: {count: 2, backoff: 5s}
      job: {framework: custom, command: [f], roles: {worker: {replicas: 1}}}
    - name: after
      dependsOn: [flaky]
      job: {framework: custom, command: [a], roles: {worker: {replicas: 1}}}
`

const timeoutDoc = `
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: rt, workspace: team}
spec:
  steps:
    - name: slow
      timeout: 30s
      retries: {count: 1, backoff: 1s}
      job: {framework: custom, command: [s], roles: {worker: {replicas: 1}}}
`

// pipelineEvents captures the phase events a pipeline publishes.
type pipelineEvents struct {
	mu  sync.Mutex
	ids map[string]bool
	got []events.PipelinePhaseData
}

func capturePipelineEvents(t *testing.T, h *pipelineHarness) *pipelineEvents {
	t.Helper()
	c := &pipelineEvents{ids: map[string]bool{}}
	h.onPublish = func(in activities.PublishEventsInput) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, m := range in.Msgs {
			if c.ids[m.ID] {
				t.Errorf("event %s published twice", m.ID)
			}
			c.ids[m.ID] = true
			ev, d, err := decodeEvent[events.PipelinePhaseData](m.Data)
			if err != nil {
				return err
			}
			if ev.Type != events.TypePipelinePhase || m.Subject != "dlc.team.pipeline.rt.status" {
				t.Errorf("event %s type %s on %s", m.ID, ev.Type, m.Subject)
			}
			c.got = append(c.got, d)
		}
		return nil
	}
	return c
}

// lines is "step:phase:reason" (the run's as ":phase:reason") for every event, in order.
func (c *pipelineEvents) lines() []string {
	var out []string
	for i, d := range c.got {
		if d.Seq != i+1 {
			return append(out, "seq out of order")
		}
		out = append(out, d.Step+":"+d.Phase+":"+d.Reason)
	}
	return out
}

// A step with retries whose job fails twice runs a third job, which succeeds; the step
// succeeds and the run goes on. Each try's job is named <run>-<step>-r<N>, and the
// events tell each try apart.
func TestPipelineStepRetriesAndTimeoutRetriesAFailedStep(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{
		"rt-flaky":    {took: time.Minute, phase: schemas.JobFailed, message: "exit code 1"},
		"rt-flaky-r1": {took: time.Minute, phase: schemas.JobFailed, message: "exit code 1"},
		"rt-flaky-r2": {took: time.Minute, phase: schemas.JobSucceeded},
	})
	evs := capturePipelineEvents(t, h)
	st := h.run(t, retriesDoc, nil)
	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("phase %s: %s", st.Phase, st.Message)
	}
	if diff := cmp.Diff([]string{"rt-flaky", "rt-flaky-r1", "rt-flaky-r2", "rt-after"}, h.startedNames()); diff != "" {
		t.Errorf("jobs started (-want +got):\n%s", diff)
	}
	if f := st.Step("flaky"); f.Attempts != 2 || f.Job != "rt-flaky-r2" || f.Outputs[schemas.OutputJob] != "rt-flaky-r2" {
		t.Errorf("flaky: %+v", f)
	}
	want := []string{":Pending:Accepted", ":Running:Started", "flaky:Running:JobStarted", "flaky:Running:Retrying", "flaky:Running:JobStarted",
		"flaky:Running:Retrying", "flaky:Running:JobStarted", "flaky:Succeeded:JobSucceeded", "after:Running:JobStarted",
		"after:Succeeded:JobSucceeded", ":Succeeded:AllStepsDone"}
	if diff := cmp.Diff(want, evs.lines()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A step whose job runs over its timeout has the job stopped; with its retry spent too,
// the step fails with reason StepTimeout and so does the run.
func TestPipelineStepRetriesAndTimeoutStopsALateStep(t *testing.T) {
	h := newPipelineHarness(t, map[string]fakeJob{"slow": {}}) // runs until stopped
	evs := capturePipelineEvents(t, h)
	st := h.run(t, timeoutDoc, nil)
	s := st.Step("slow")
	if st.Phase != schemas.PipelineFailed || s.Phase != schemas.StepFailed || s.Reason != workflows.ReasonStepTimeout ||
		!strings.Contains(s.Message, "ran over the step's timeout of 30s") || s.Attempts != 1 {
		t.Fatalf("run %s (%s); step %+v", st.Phase, st.Message, s)
	}
	wantStopped := []string{workflows.JobWorkflowID("team", "rt-slow"), workflows.JobWorkflowID("team", "rt-slow-r1")}
	if diff := cmp.Diff(wantStopped, h.stopped); diff != "" {
		t.Errorf("jobs stopped (-want +got):\n%s", diff)
	}
	lines := evs.lines()
	if !slices.Contains(lines, "slow:Running:Retrying") || !slices.Contains(lines, "slow:Failed:StepTimeout") ||
		lines[len(lines)-1] != ":Failed:StepFailed" {
		t.Errorf("events: %v", lines)
	}
}
