package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// eventSchemas compiles the checked-in event schemas (events/jsonschema): the envelope
// and each type's data.
type eventSchemas struct {
	envelope *jsonschema.Schema
	data     map[string]*jsonschema.Schema
}

func loadEventSchemas(t *testing.T) *eventSchemas {
	t.Helper()
	c := jsonschema.NewCompiler()
	compile := func(file string) *jsonschema.Schema {
		path, err := filepath.Abs(filepath.Join("..", "events", "jsonschema", file))
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile(path)
		if err != nil {
			t.Fatalf("compile %s: %v", file, err)
		}
		return s
	}
	out := &eventSchemas{envelope: compile("event.schema.json"), data: map[string]*jsonschema.Schema{}}
	for _, typ := range events.Types {
		out.data[typ.Type] = compile(events.SchemaFile(typ.Type))
	}
	return out
}

// validate checks one published message against the envelope's schema and its type's
// data schema, and returns the event.
func (s *eventSchemas) validate(t *testing.T, raw []byte) events.Event {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.envelope.Validate(doc); err != nil {
		t.Errorf("event %s does not match event.schema.json: %v", raw, err)
	}
	var ev events.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ds, ok := s.data[ev.Type]
	if !ok {
		t.Fatalf("event type %s has no schema", ev.Type)
	}
	data, err := jsonschema.UnmarshalJSON(bytes.NewReader(ev.Data))
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Validate(data); err != nil {
		t.Errorf("data of %s event %s does not match %s: %v", ev.Type, ev.ID, events.SchemaFile(ev.Type), err)
	}
	return ev
}

// published reads every event on subject from DLC_EVENTS, each checked against the
// schemas, with its data decoded as T.
func published[T any](t *testing.T, ctx context.Context, s *eventSchemas, subject string) []T {
	t.Helper()
	var out []T
	err := env.events.ReadUntil(ctx, jetstream.EventsStream, subject, nil, func(_ string, raw []byte) error {
		ev := s.validate(t, raw)
		var d T
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", subject, err)
	}
	return out
}

// A pipeline whose first step fails once and has retries, and whose second step runs
// over its timeout: the first step's second try (a new job) succeeds, the second step's
// job is stopped and the step fails with reason StepTimeout. The run and an experiment
// publish their phase events, every one of which matches the checked-in JSON Schemas.
func TestPipelineStepRetriesAndTimeout(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	dir := t.TempDir()
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: rt, workspace: %s}
spec:
  steps:
    - name: flaky
      retries: {count: 2, backoff: 1s}
      job:
        framework: custom
        command: [sh, -c, 'n=$(cat %[2]s/count 2>/dev/null || echo 0); echo $((n+1)) > %[2]s/count; echo "try $n"; [ "$n" -ge 1 ]']
        roles: {worker: {replicas: 1}}
        faultTolerance: {maxRestarts: 0}
    - name: slow
      dependsOn: [flaky]
      timeout: 3s
      job:
        framework: custom
        command: [sleep, "600"]
        roles: {worker: {replicas: 1}}
`, ws, dir)
	// Bad retries and timeouts are refused, each naming its field.
	bad := strings.Replace(strings.Replace(doc, "count: 2, backoff: 1s", "count: 11, backoff: 2h", 1), "timeout: 3s", "timeout: -1s", 1)
	_, err := env.api.RunPipeline(ctx, []byte(bad), nil)
	for _, field := range []string{"spec.steps[0].retries.count", "spec.steps[0].retries.backoff", "spec.steps[1].timeout"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("bad retries/timeout: %v; want an error naming %s", err, field)
		}
	}
	if _, err := env.api.RunPipeline(ctx, []byte(doc), nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.api.WaitPipeline(ctx, ws, "rt", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status
	flaky, slow := st.Step("flaky"), st.Step("slow")
	t.Logf("run %s (%s); flaky %s %s tries %d; slow %s %s: %s", st.Phase, st.Message, flaky.Phase, flaky.Job, flaky.Attempts+1,
		slow.Phase, slow.Reason, slow.Message)

	// The fault happened: the first try's job failed.
	first, err := env.api.GetJob(ctx, ws, "rt-flaky")
	if err != nil || first.Status.Phase != schemas.JobFailed {
		t.Fatalf("first try rt-flaky: %+v, %v; want Failed", first, err)
	}
	second, err := env.api.GetJob(ctx, ws, "rt-flaky-r1")
	if err != nil || second.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("second try rt-flaky-r1: %+v, %v; want Succeeded", second, err)
	}
	if second.Status.StartTime.Before(*first.Status.FinishTime) {
		t.Errorf("the retry started at %s, before the first try ended at %s", second.Status.StartTime, first.Status.FinishTime)
	}
	if flaky.Phase != schemas.StepSucceeded || flaky.Attempts != 1 || flaky.Job != "rt-flaky-r1" {
		t.Errorf("flaky: %+v; want Succeeded on its second try, rt-flaky-r1", flaky)
	}
	if _, err := env.api.GetJob(ctx, ws, "rt-flaky-r2"); !dlc.IsNotFound(err) {
		t.Errorf("a third try ran: %v", err)
	}
	// The slow step's job was stopped at its timeout.
	sj, err := env.api.GetJob(ctx, ws, "rt-slow")
	if err != nil || sj.Status.Phase != schemas.JobStopped {
		t.Fatalf("rt-slow: %+v, %v; want Stopped", sj, err)
	}
	if slow.Phase != schemas.StepFailed || slow.Reason != workflows.ReasonStepTimeout || st.Phase != schemas.PipelineFailed {
		t.Errorf("slow %s/%s, run %s; want Failed/StepTimeout, Failed", slow.Phase, slow.Reason, st.Phase)
	}
	ran := sj.Status.FinishTime.Sub(*sj.Status.StartTime)
	if ran >= time.Minute {
		t.Errorf("rt-slow ran %s: its 3s timeout did not stop it", ran)
	}

	schemasOf := loadEventSchemas(t)
	var lines []string
	testutil.Eventually(t, 30*time.Second, "the run's last phase event", func() error {
		lines = nil
		for _, d := range published[events.PipelinePhaseData](t, ctx, schemasOf, events.PipelineStatusSubject(ws, "rt")) {
			lines = append(lines, fmt.Sprintf("%s:%s:%s:%d", d.Step, d.Phase, d.Reason, d.Attempt))
		}
		if len(lines) == 0 || lines[len(lines)-1] != ":Failed:StepFailed:0" {
			return fmt.Errorf("events so far: %v", lines)
		}
		return nil
	})
	t.Logf("pipeline events: %v", lines)
	for _, want := range []string{":Running:Started:0", "flaky:Running:JobStarted:0", "flaky:Running:Retrying:1",
		"flaky:Running:JobStarted:1", "flaky:Succeeded:JobSucceeded:1", "slow:Running:JobStarted:0", "slow:Failed:StepTimeout:0"} {
		if !slices.Contains(lines, want) {
			t.Errorf("no pipeline event %s in %v", want, lines)
		}
	}
}

// An experiment publishes a phase event at each phase change (Running, Stopping,
// Stopped, Running again, Succeeded), each matching the JSON Schemas.
func TestExperimentAndPipelinePhaseEvents(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	exp := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: phases, workspace: %s}
spec:
  searchSpace: [{name: x, type: float, min: 0.1, max: 0.9}]
  objective: {metric: loss, direction: minimize}
  algorithm: {name: random, seed: 3}
  maxTrials: 2
  parallelism: 1
  trialTemplate:
    framework: custom
    command: [sh, -c, 'until [ -e %s ]; do sleep 0.1; done; echo "dlc:metric loss=$X"']
    env: [{name: X, value: "${params.x}"}]
    roles: {worker: {replicas: 1}}
`, ws, gate)
	if _, err := env.api.CreateExperiment(ctx, []byte(exp)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "a trial runs", func() error {
		e, err := env.api.GetExperiment(ctx, ws, "phases")
		if err != nil {
			return err
		}
		if e.Status.Running == 0 {
			return fmt.Errorf("%s, %d running", e.Status.Phase, e.Status.Running)
		}
		return nil
	})
	if r, err := env.api.StopExperiment(ctx, ws, "phases", "pause"); err != nil || r.Phase != schemas.ExperimentStopped {
		t.Fatalf("stop: %+v, %v", r, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := env.api.ResumeExperiment(ctx, ws, "phases"); err != nil {
		t.Fatal(err)
	}
	e := waitExperiment(t, ctx, env.api, ws, "phases")
	if e.Status.Phase != schemas.ExperimentSucceeded {
		t.Fatalf("experiment: %s (%s)", e.Status.Phase, e.Status.Message)
	}

	schemasOf := loadEventSchemas(t)
	var got []events.ExperimentPhaseData
	testutil.Eventually(t, 30*time.Second, "the experiment's last phase event", func() error {
		got = published[events.ExperimentPhaseData](t, ctx, schemasOf, events.ExperimentStatusSubject(ws, "phases"))
		if len(got) == 0 || got[len(got)-1].Phase != string(schemas.ExperimentSucceeded) {
			return fmt.Errorf("%d events so far", len(got))
		}
		return nil
	})
	var phases []string
	for _, d := range got {
		phases = append(phases, d.Previous+">"+d.Phase)
	}
	want := []string{">Pending", "Pending>Running", "Running>Stopping", "Stopping>Stopped", "Stopped>Running", "Running>Succeeded"}
	if !slices.Equal(phases, want) {
		t.Errorf("experiment phase events %v, want %v", phases, want)
	}
	last := got[len(got)-1]
	if last.UID != e.UID || last.Trials != 2 || last.Completed != 2 || last.BestTrial == nil || *last.BestTrial != *e.Status.BestTrial {
		t.Errorf("last phase event %+v; experiment uid %s best %v", last, e.UID, e.Status.BestTrial)
	}
	// The trial events on the experiment's other subject match their schema too.
	if trials := published[events.TrialData](t, ctx, schemasOf, events.ExperimentTrialSubject(ws, "phases")); len(trials) == 0 {
		t.Error("no trial events")
	}
}
