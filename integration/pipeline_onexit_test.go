package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A pipeline whose step fails runs its onExit steps on the real stack: notify gets the
// outcome (Failed, the failed step, its message) and prints it, after the failed job
// has ended; report, after notify, runs too; the run stays Failed.
func TestPipelineOnExitRunsAfterAFailure(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: onexit, workspace: %s}
spec:
  steps:
    - name: train
      job: {framework: custom, command: [sh, -c, 'echo training; exit 3'], roles: {worker: {replicas: 1}}, faultTolerance: {maxRestarts: 0}}
    - name: publish
      dependsOn: [train]
      job: {framework: custom, command: [sh, -c, 'echo never'], roles: {worker: {replicas: 1}}}
  onExit:
    - name: notify
      job:
        framework: custom
        command: [sh, -c, 'echo "outcome=$1 failed=$2 message=$3"', notify, "${pipeline.status}", "${pipeline.failedStep}", "${pipeline.message}"]
        roles: {worker: {replicas: 1}}
    - name: report
      dependsOn: [notify]
      job: {framework: custom, command: [sh, -c, 'echo reported'], roles: {worker: {replicas: 1}}}
`, ws)
	if _, err := c.RunPipeline(ctx, []byte(doc), nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitPipeline(ctx, ws, "onexit", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status
	t.Logf("run %s %s: %s", st.Phase, st.Reason, st.Message)
	if st.Phase != schemas.PipelineFailed || st.Reason != workflows.ReasonStepFailed {
		t.Errorf("run %s/%s, want Failed/StepFailed", st.Phase, st.Reason)
	}
	if diff := cmp.Diff([]string{"train:Failed", "publish:Skipped", "notify:Succeeded", "report:Succeeded"}, stepsOf(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	recordHistory(t, ctx, workflows.PipelineWorkflowID(ws, "onexit"), "pipeline_on_exit_after_failure.json")
	train, err := c.GetJob(ctx, ws, "onexit-train")
	if err != nil || train.Status.Phase != schemas.JobFailed {
		t.Fatalf("onexit-train: %v, %v; want Failed", train, err)
	}
	notify, err := c.GetJob(ctx, ws, "onexit-notify")
	if err != nil || notify.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("onexit-notify: %v, %v; want Succeeded", notify, err)
	}
	if notify.Status.StartTime.Before(*train.Status.FinishTime) {
		t.Errorf("notify started at %s, before train ended at %s", notify.Status.StartTime, train.Status.FinishTime)
	}
	want := "outcome=Failed failed=train message=step train failed: " + st.Step("train").Message
	var lines []string
	found := false
	for _, r := range jobLogs(t, ctx, ws, "onexit-notify") {
		lines = append(lines, r.Line)
		if strings.Contains(r.Line, want) {
			found = true
		}
	}
	if !found {
		t.Errorf("notify's logs %q do not hold %q", lines, want)
	}
}
