package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A schedule that names a stored PipelineTemplate (spec.action.pipelineTemplateRef) on
// the real stack: a fire runs the template as it is then, with the schedule's params
// and label; after the template changes, the next fire runs the new version; after it
// is deleted from the schedule's workspace (another workspace still has one of that
// name), a fire is recorded StartFailed, saying the template is missing, in the
// schedule's history and in its opendlc.schedule.run.v1 event, and the schedule goes on.
func TestScheduleRunsAStoredPipelineTemplate(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	other := "x" + ws[1:] // another workspace, as long as the test's
	c := env.api
	const name = "tplsched"
	template := func(ws, version string) []byte {
		return fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: PipelineTemplate
metadata: {name: retrain, workspace: %s, labels: {purpose: template-test}}
spec:
  params: [{name: threshold}, {name: shard, default: latest}]
  steps:
    - name: train
      job: {framework: custom, command: [sh, -c, 'echo "version=%s threshold=$0 shard=$1"', "${params.threshold}", "${params.shard}"], roles: {worker: {replicas: 1}}}
`, ws, version)
	}
	if _, err := c.ApplyPipelineTemplate(ctx, template(ws, "v1")); err != nil {
		t.Fatal(err)
	}
	// Never due by itself (1 January, 00:00): fired by hand.
	if _, err := c.CreateSchedule(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: %s, workspace: %s}
spec:
  cron: "0 0 1 1 *"
  overlapPolicy: allowAll
  action:
    pipelineTemplateRef: {name: retrain, params: {threshold: "0.7"}}
`, name, ws)); err != nil {
		t.Fatalf("create schedule: %v", err)
	}

	// A trigger's nominal time is its second, and a second trigger in the same second
	// answers with the first one's run and starts nothing (docs/schedules.md): trigger
	// asks again until the answer is a run of a later second than the previous one's.
	var lastNominal time.Time
	trigger := func() *api.TriggerScheduleResult {
		t.Helper()
		var tr *api.TriggerScheduleResult
		testutil.Eventually(t, itest.Left(ctx), "a trigger in a second after "+lastNominal.Format(time.RFC3339), func() error {
			var err error
			if tr, err = c.TriggerSchedule(ctx, ws, name, ""); err != nil {
				return err
			}
			if !tr.Run.NominalTime.After(lastNominal) {
				return fmt.Errorf("answered with the run of %s", tr.Run.NominalTime.Format(time.RFC3339))
			}
			return nil
		}, 100*time.Millisecond)
		lastNominal = tr.Run.NominalTime
		return tr
	}
	// fire triggers the schedule and waits for the run's pipeline to succeed; it
	// returns the run's name.
	fire := func(version string) string {
		t.Helper()
		tr := trigger()
		if tr.Run.Outcome != schemas.RunRunning || tr.Run.Kind != schemas.KindPipeline ||
			tr.Run.Job != workflows.ScheduledJobName(name, tr.Run.NominalTime) {
			t.Fatalf("trigger: %+v", tr)
		}
		p := waitPipeline(t, ctx, ws, tr.Run.Job)
		if p.Status.Phase != schemas.PipelineSucceeded {
			t.Fatalf("run %s: %s (%s), want Succeeded", tr.Run.Job, p.Status.Phase, p.Status.Message)
		}
		meta := p.Spec.Metadata
		if meta.Annotations[schemas.AnnotationPipelineTemplate] != "retrain" || meta.Labels[schemas.LabelSchedule] != name ||
			meta.Labels["purpose"] != "template-test" || p.Status.Params["threshold"] != "0.7" || p.Status.Params["shard"] != "latest" {
			t.Errorf("run %s: metadata %+v, params %v", tr.Run.Job, meta, p.Status.Params)
		}
		want := "version=" + version + " threshold=0.7 shard=latest"
		var lines []string
		for _, r := range jobLogs(t, ctx, ws, schemas.StepJobName(tr.Run.Job, "train")) {
			lines = append(lines, r.Line)
		}
		if !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("run %s printed %q, want %q (the template as it was at the fire)", tr.Run.Job, lines, want)
		}
		return tr.Run.Job
	}
	first := fire("v1")
	if _, err := c.ApplyPipelineTemplate(ctx, template(ws, "v2")); err != nil {
		t.Fatal(err)
	}
	second := fire("v2")
	if p, err := c.GetPipeline(ctx, ws, first); err != nil || !strings.Contains(strings.Join(p.Spec.Spec.Steps[0].Job.Command, " "), "version=v1") {
		t.Errorf("the first run after the template changed: %v, %v; want it to keep v1", p, err)
	}

	// Gone from the schedule's workspace; another workspace's template of the same
	// name is not used.
	if _, err := c.ApplyPipelineTemplate(ctx, template(other, "other")); err != nil {
		t.Fatal(err)
	}
	if err := c.DeletePipelineTemplate(ctx, ws, "retrain"); err != nil {
		t.Fatal(err)
	}
	tr := trigger()
	wantMsg := `pipeline template "retrain" not found in workspace ` + ws
	if tr.Run.Outcome != schemas.RunStartFailed || tr.Run.Job != "" || !strings.Contains(tr.Run.Message, wantMsg) {
		t.Fatalf("trigger with the template deleted: %+v; want StartFailed: %s", tr, wantMsg)
	}
	sv := waitSchedule(t, ctx, c, ws, name, "two runs succeeded and one failed to start", func(s *api.ScheduleView) bool {
		return itest.SucceededRuns(s.Status) == 2
	})
	if sv.Status.Counts.Started != 2 {
		t.Errorf("counts %+v, want 2 started", sv.Status.Counts)
	}
	var failed int
	for _, r := range sv.Status.History {
		switch {
		case r.Outcome == schemas.RunStartFailed && strings.Contains(r.Message, wantMsg):
			failed++
		case r.Outcome == schemas.RunSucceeded && (r.Job == first || r.Job == second):
		default:
			t.Errorf("history entry %+v", r)
		}
	}
	if failed != 1 {
		t.Errorf("history %+v: want one StartFailed run naming the missing template", sv.Status.History)
	}
	if l, err := c.ListPipelines(ctx, other, dlc.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("pipelines of workspace %s: %+v, %v; want none", other, l, err)
	}

	// The schedule's run events say the same.
	var startFailed []events.ScheduleRunData
	testutil.Eventually(t, itest.Left(ctx), "the StartFailed run event", func() error {
		startFailed = nil
		_, all := streamEvents[events.ScheduleRunData](t, ctx, env.events, events.ScheduleRunSubject(ws, name))
		for _, d := range all {
			if d.Action == "StartFailed" {
				startFailed = append(startFailed, d)
			}
		}
		if len(startFailed) == 0 {
			return fmt.Errorf("no StartFailed event among %d", len(all))
		}
		return nil
	}, 200*time.Millisecond)
	if len(startFailed) != 1 || startFailed[0].Outcome != string(schemas.RunStartFailed) ||
		startFailed[0].Kind != string(schemas.KindPipeline) || !strings.Contains(startFailed[0].Message, wantMsg) {
		t.Errorf("StartFailed events %+v, want one naming the missing template", startFailed)
	}

	recordHistory(t, ctx, workflows.ScheduleWorkflowID(ws, name), "schedule_pipeline_template_ref.json")
	if err := c.DeleteSchedule(ctx, ws, name); err != nil {
		t.Errorf("delete: %v", err)
	}
}
