package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// notOnTheLocalStack are the event types the embedded stack cannot publish, each with
// why and what the test checks instead. Every other type of events.Types must be read
// back from the stream.
var notOnTheLocalStack = map[string]string{
	events.TypeNodeHealth: "the local backend checks no nodes (node health is the Kubernetes backend's): " +
		"the test checks the message workflows.NodeHealthEvent builds, the one the node-health workflow publishes",
}

// sdkEvent is one message read back from JetStream, parsed by the CloudEvents SDK and by
// OpenDLC's own envelope type.
type sdkEvent struct {
	subject string
	ce      cloudevents.Event
	ev      events.Event
}

// parseWithSDK parses one published message with the CloudEvents SDK, validates it
// (Validate: the attributes CloudEvents 1.0 requires, well formed), checks that the SDK
// reads the same attributes as OpenDLC's type and the workspace extension, and checks
// the envelope and its data against the checked-in JSON Schemas.
func parseWithSDK(t *testing.T, s *eventSchemas, subject string, raw []byte, ws string) sdkEvent {
	t.Helper()
	ce := cloudevents.New()
	if err := json.Unmarshal(raw, &ce); err != nil {
		t.Fatalf("the CloudEvents SDK cannot read %s: %v", raw, err)
	}
	if err := ce.Validate(); err != nil {
		t.Errorf("the CloudEvents SDK refuses %s: %v", raw, err)
	}
	ev := s.validate(t, raw) // the envelope's schema and the type's data schema
	if ce.SpecVersion() != "1.0" || ce.ID() != ev.ID || ce.Type() != ev.Type || ce.Source() != ev.Source ||
		ce.Subject() != ev.Subject || !ce.Time().Equal(ev.Time) || ce.DataContentType() != "application/json" {
		t.Errorf("the SDK reads %s as %s", raw, ce.String())
	}
	if got := ce.Extensions()["workspace"]; got != ws {
		t.Errorf("event %s: workspace extension %v, want %s", ce.ID(), got, ws)
	}
	if !json.Valid(ce.Data()) || string(compactJSON(t, ce.Data())) != string(compactJSON(t, ev.Data)) {
		t.Errorf("event %s: the SDK's data %s differs from %s", ce.ID(), ce.Data(), ev.Data)
	}
	return sdkEvent{subject: subject, ce: ce, ev: ev}
}

func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readWithSDK reads every message stored on filter in stream and parses each with the
// SDK.
func readWithSDK(t *testing.T, ctx context.Context, s *eventSchemas, stream, filter, ws string) []sdkEvent {
	t.Helper()
	var out []sdkEvent
	err := env.events.ReadUntil(ctx, stream, filter, nil, func(subject string, raw []byte) error {
		out = append(out, parseWithSDK(t, s, subject, raw, ws))
		return nil
	})
	if err != nil {
		t.Fatalf("read %s %s: %v", stream, filter, err)
	}
	return out
}

// dataOf decodes the data of the events of type typ.
func dataOf[T any](t *testing.T, evs []sdkEvent, typ string) []T {
	t.Helper()
	var out []T
	for _, e := range evs {
		if e.ce.Type() != typ {
			continue
		}
		var d T
		if err := e.ce.DataAs(&d); err != nil {
			t.Fatalf("event %s: %v", e.ce.ID(), err)
		}
		out = append(out, d)
	}
	return out
}

// A real trigger that runs a pipeline (whose step is a job reporting a metric), an
// experiment with two trials and a schedule fired once publish their events on the real
// stack; every message read back from JetStream (events and the audit stream) is
// parsed and validated by the CloudEvents Go SDK and matches the JSON Schemas, and every
// event type OpenDLC defines (events.Types) is among them. The phase events begin with
// Pending, each later one naming as previous the phase of the one before; trial events
// carry the trial's number and their own sequence; the schedule publishes one Started
// and one Finished event for its run.
func TestEveryEventTypeWithTheCloudEventsSDK(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 5*time.Minute)
	ws := workspace(t)
	sch := loadEventSchemas(t)

	// A trigger that runs a one-step pipeline, fired by one inbound event.
	tr, err := env.api.ApplyTrigger(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: ce, workspace: %[1]s}
spec:
  subject: dlc.%[1]s.trigger.ce
  action:
    pipeline:
      steps:
        - name: train
          job:
            framework: custom
            command: [sh, -c, 'echo "dlc:metric loss=0.25"']
            roles: {worker: {replicas: 1}}
`, ws))
	if err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	inbound := `{"specversion":"1.0","id":"ce-1","source":"/test/sdk","type":"com.example.ready","datacontenttype":"application/json","data":{}}`
	if _, err := env.events.JetStream().Publish(ctx, tr.Spec.Subject, []byte(inbound)); err != nil {
		t.Fatal(err)
	}
	// An experiment with two trials, one at a time.
	if _, err := env.api.CreateExperiment(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: ce, workspace: %s}
spec:
  searchSpace: [{name: x, type: float, min: 0.1, max: 0.9}]
  objective: {metric: loss, direction: minimize}
  algorithm: {name: random, seed: 5}
  maxTrials: 2
  parallelism: 1
  trialTemplate:
    framework: custom
    command: [sh, -c, 'echo "dlc:metric loss=$X"']
    env: [{name: X, value: "${params.x}"}]
    roles: {worker: {replicas: 1}}
`, ws)); err != nil {
		t.Fatalf("create experiment: %v", err)
	}
	// A schedule that is never due by itself (1 January, 00:00), fired once by hand.
	if _, err := env.api.CreateSchedule(ctx, scheduleDoc(ws, "ce", "0 0 1 1 *", "")); err != nil {
		t.Fatalf("create schedule: %v", err)
	}
	fired, err := env.api.TriggerSchedule(ctx, ws, "ce", "")
	if err != nil || fired.Run.Job == "" || fired.Run.Outcome != schemas.RunRunning {
		t.Fatalf("trigger schedule: %+v, %v", fired, err)
	}

	// An alert: a job that reports no "never" metric for 1s fires it, and resolves it
	// when it ends (the rule forwards its alerts to a subject of DLC_NOTIFY). It runs
	// for 7s, long enough for the shared stack's worker (a sample every 2s) to publish
	// resource samples of its replica.
	if _, err := env.api.ApplyRule(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: ce-alert, workspace: %[1]s}
spec:
  match: {jobs: [alerted]}
  alert: {metric: never, absentFor: 1s}
  subject: dlc.%[1]s.notify.ce-alert
`, ws)); err != nil {
		t.Fatalf("apply alert rule: %v", err)
	}
	submit(t, ctx, itest.ShellJob(ws, "alerted", "sleep 7"))

	runName := schemas.TriggerRunName("ce", "/test/sdk ce-1")
	if p := waitPipeline(t, ctx, ws, runName); p.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("pipeline %s: %s (%s)", runName, p.Status.Phase, p.Status.Message)
	}
	exp := waitExperiment(t, ctx, env.api, ws, "ce")
	if exp.Status.Phase != schemas.ExperimentSucceeded || len(exp.Status.Trials) != 2 {
		t.Fatalf("experiment: %s (%s), %d trials", exp.Status.Phase, exp.Status.Message, len(exp.Status.Trials))
	}
	sv := waitSchedule(t, ctx, env.api, ws, "ce", "its run succeeded", func(s *api.ScheduleView) bool { return itest.SucceededRuns(s.Status) == 1 })
	if h := sv.Status.History; len(h) != 1 || h[0].Job != fired.Run.Job {
		t.Fatalf("schedule history %+v; fired %s", h, fired.Run.Job)
	}

	// Read the workspace's events until the last ones of each source are stored.
	var evs []sdkEvent
	testutil.Eventually(t, itest.Left(ctx), "the last event of each run", func() error {
		evs = readWithSDK(t, ctx, sch, jetstream.EventsStream, "dlc."+ws+".>", ws)
		var missing []string
		last := map[string]string{}
		for _, e := range evs {
			switch e.ce.Type() {
			case events.TypeExperimentPhase, events.TypePipelinePhase:
				var d struct {
					Phase, Step string
				}
				_ = e.ce.DataAs(&d)
				if d.Step == "" {
					last[e.ce.Type()] = d.Phase
				}
			case events.TypeScheduleRun:
				var d events.ScheduleRunData
				_ = e.ce.DataAs(&d)
				last[e.ce.Type()] = d.Action
			case events.TypeAlert:
				var d events.AlertData
				_ = e.ce.DataAs(&d)
				last[e.ce.Type()] = d.State
			}
		}
		for typ, want := range map[string]string{events.TypeExperimentPhase: "Succeeded", events.TypePipelinePhase: "Succeeded",
			events.TypeScheduleRun: "Finished", events.TypeAlert: events.AlertResolved} {
			if last[typ] != want {
				missing = append(missing, fmt.Sprintf("%s: last %q, want %s", typ, last[typ], want))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d events so far; %s", len(evs), strings.Join(missing, "; "))
		}
		return nil
	}, itest.PollInterval)
	audit := readWithSDK(t, ctx, sch, jetstream.AuditStream, events.AuditSubject(ws), ws)
	all := append(slices.Clone(evs), audit...)

	// The node-health event, which this stack cannot publish, as the workflow builds it.
	now := time.Now().UTC().Truncate(time.Second)
	nh, err := workflows.NodeHealthEvent(backend.NodeHealth{Node: ws + "-node", Healthy: true, Reason: backend.ReasonChecksPassed,
		CheckedAt: now, Checks: []events.HealthCheck{{Name: backend.CheckReady, OK: true}}}, "some-job")
	if err != nil {
		t.Fatal(err)
	}
	nodeEv := parseWithSDK(t, sch, nh.Subject, nh.Data, workflows.NodeEventsWorkspace)

	// Every type appears; no id twice; each on the subject its type says.
	count := map[string]int{}
	ids := map[string]bool{}
	for _, e := range all {
		count[e.ce.Type()]++
		if ids[e.ce.ID()] {
			t.Errorf("event id %s read twice", e.ce.ID())
		}
		ids[e.ce.ID()] = true
	}
	t.Logf("%d events, %d audit records; by type %v", len(evs), len(audit), count)
	for _, typ := range events.Types {
		if why, ok := notOnTheLocalStack[typ.Type]; ok {
			if nodeEv.ce.Type() != typ.Type {
				t.Errorf("%s: not checked (%s)", typ.Type, why)
			}
			continue
		}
		if count[typ.Type] == 0 {
			t.Errorf("no %s event was published", typ.Type)
		}
	}

	checkPhaseChain := func(what string, phases, previous []string, seqs []int) {
		t.Helper()
		if len(phases) == 0 || phases[0] != "Pending" || previous[0] != "" {
			t.Errorf("%s: first phase events %v (previous %v), want Pending with no previous", what, phases, previous)
			return
		}
		for i := 1; i < len(phases); i++ {
			if previous[i] != phases[i-1] || seqs[i] <= seqs[i-1] {
				t.Errorf("%s: event %d (seq %d) is %s from %s, but the event before (seq %d) was %s", what, i, seqs[i], phases[i], previous[i], seqs[i-1], phases[i-1])
			}
		}
	}
	// The experiment's phase events.
	var phases, previous []string
	var seqs []int
	for _, d := range dataOf[events.ExperimentPhaseData](t, evs, events.TypeExperimentPhase) {
		phases, previous, seqs = append(phases, d.Phase), append(previous, d.Previous), append(seqs, d.Seq)
		if d.UID != exp.UID || d.Experiment != "ce" {
			t.Errorf("experiment phase event %+v; uid %s", d, exp.UID)
		}
	}
	checkPhaseChain("experiment", phases, previous, seqs)
	if seqs[0] != 1 {
		t.Errorf("the experiment's Pending event has seq %d, want 1", seqs[0])
	}
	// The pipeline run's own phase events (the steps' come in between).
	phases, previous, seqs = nil, nil, nil
	for _, d := range dataOf[events.PipelinePhaseData](t, evs, events.TypePipelinePhase) {
		if d.Step == "" {
			phases, previous, seqs = append(phases, d.Phase), append(previous, d.Previous), append(seqs, d.Seq)
		}
	}
	checkPhaseChain("pipeline run", phases, previous, seqs)
	// The schedule's job (a job is the reference: its first event is Pending with no
	// previous phase).
	phases, previous, seqs = nil, nil, nil
	for _, d := range dataOf[events.JobPhaseData](t, evs, events.TypeJobPhase) {
		if d.Job == fired.Run.Job {
			phases, previous, seqs = append(phases, d.Phase), append(previous, d.Previous), append(seqs, d.Seq)
		}
	}
	checkPhaseChain("scheduled job", phases, previous, seqs)

	// Trial events: each trial's own sequence from 1, its number and job as the
	// experiment's status has them.
	byTrial := map[int][]events.TrialData{}
	for _, d := range dataOf[events.TrialData](t, evs, events.TypeExperimentTrial) {
		byTrial[d.TrialID] = append(byTrial[d.TrialID], d)
	}
	for _, st := range exp.Status.Trials {
		got := byTrial[st.ID]
		var lines []string
		for i, d := range got {
			lines = append(lines, fmt.Sprintf("%d:%s:%s", d.Seq, d.Phase, d.Trial))
			if d.Seq != i+1 || d.Trial != st.Job || d.UID != exp.UID {
				t.Errorf("trial %d event %d: %+v; want seq %d, job %s", st.ID, i, d, i+1, st.Job)
			}
		}
		if len(got) < 2 || got[0].Phase != string(schemas.TrialRunning) || got[len(got)-1].Phase != string(st.Phase) {
			t.Errorf("trial %d (%s): events %v", st.ID, st.Phase, lines)
		}
	}
	if len(byTrial) != len(exp.Status.Trials) {
		t.Errorf("trial events for trials %v; the experiment has %d", byTrial, len(exp.Status.Trials))
	}

	// The schedule's run events: Started, then Finished, numbered from 1.
	runs := dataOf[events.ScheduleRunData](t, evs, events.TypeScheduleRun)
	var runLines []string
	for _, d := range runs {
		runLines = append(runLines, fmt.Sprintf("%d %s %s %s %s %s", d.Seq, d.Action, d.Outcome, d.Trigger, d.Kind, d.Target))
	}
	want := []string{
		"1 Started Running Trigger TrainingJob " + fired.Run.Job,
		"2 Finished Succeeded Trigger TrainingJob " + fired.Run.Job,
	}
	if !slices.Equal(runLines, want) {
		t.Errorf("schedule run events %q, want %q", runLines, want)
	}
	for _, d := range runs {
		if d.Schedule != "ce" || d.UID == "" || !d.ScheduledTime.Equal(fired.Run.NominalTime) || d.StartTime == nil {
			t.Errorf("schedule run event %+v; fired %+v", d, fired.Run)
		}
	}
	// The trigger's fired event names the run it started.
	if f := dataOf[events.TriggerFiredData](t, evs, events.TypeTriggerFired); len(f) != 1 || f[0].StartedName != runName {
		t.Errorf("trigger fired events %+v, want one naming %s", f, runName)
	}

	// The histories of the changes pending-phase-events and schedule-run-events.
	recordHistory(t, ctx, workflows.ExperimentWorkflowID(ws, "ce"), "experiment_pending_event.json")
	recordHistory(t, ctx, workflows.PipelineWorkflowID(ws, runName), "pipeline_pending_event.json")
	recordHistory(t, ctx, workflows.ScheduleWorkflowID(ws, "ce"), "schedule_run_events.json")
}
