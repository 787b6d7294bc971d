package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A run whose second step fails is retried on the real stack: the retry reuses the
// first step's outputs and metrics without running its job again, reruns the failed
// step (which now succeeds) and runs the step it had skipped. Retrying a run that
// has not failed is refused.
func TestPipelineRetryReusesSucceededSteps(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api
	dir := t.TempDir()
	gate := filepath.Join(dir, "fixed")
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: rr, workspace: %s}
spec:
  steps:
    - name: prepare
      job: {framework: custom, command: [sh, -c, 'echo run >> %[2]s/prepare-runs; echo "dlc:metric rows=42"'], roles: {worker: {replicas: 1}}}
      outputs: {data: "s3://dlc/workspaces/%[1]s/data/${pipeline.name}"}
    - name: train
      dependsOn: [prepare]
      job:
        framework: custom
        command: [sh, -c, 'echo "data=$0 rows=$1"; [ -e %[3]s ]', "${steps.prepare.outputs.data}", "${steps.prepare.metrics.rows}"]
        roles: {worker: {replicas: 1}}
        faultTolerance: {maxRestarts: 0}
    - name: publish
      dependsOn: [train]
      job: {framework: custom, command: [sh, -c, 'echo published'], roles: {worker: {replicas: 1}}}
`, ws, dir, gate)
	if _, err := c.RunPipeline(ctx, []byte(doc), nil); err != nil {
		t.Fatal(err)
	}
	first, err := c.WaitPipeline(ctx, ws, "rr", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"prepare:Succeeded", "train:Failed", "publish:Skipped"}, stepsOf(first.Status)); diff != "" {
		t.Fatalf("first run's steps (-want +got):\n%s", diff)
	}
	var apiErr *dlc.Error
	if _, err := c.RetryPipeline(ctx, ws, "nope", ""); !dlc.IsNotFound(err) {
		t.Errorf("retrying an unknown run: %v, want 404", err)
	}

	// The cause is fixed; the retry reruns train and runs publish, not prepare.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	retry, err := c.RetryPipeline(ctx, ws, "rr", "")
	if err != nil {
		t.Fatal(err)
	}
	if retry.Spec.Metadata.Name != "rr-retry-1" {
		t.Fatalf("the retry is named %s, want rr-retry-1", retry.Spec.Metadata.Name)
	}
	p, err := c.WaitPipeline(ctx, ws, "rr-retry-1", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status
	t.Logf("retry %s: %s", st.Phase, st.Message)
	if diff := cmp.Diff([]string{"prepare:Succeeded", "train:Succeeded", "publish:Succeeded"}, stepsOf(st)); diff != "" {
		t.Fatalf("retry's steps (-want +got):\n%s", diff)
	}
	recordHistory(t, ctx, workflows.PipelineWorkflowID(ws, "rr-retry-1"), "pipeline_retry_reused.json")
	prep := st.Step("prepare")
	if prep.Reason != workflows.ReasonReused || prep.ReusedFrom != "rr" || prep.Outputs["job"] != "rr-prepare" || prep.Metrics["rows"] != 42 {
		t.Errorf("prepare in the retry = %+v; want reused from rr with rr-prepare's outputs and metrics", prep)
	}
	// prepare's job ran once, in the first run: no job of the retry's, one line written.
	if _, err := c.GetJob(ctx, ws, "rr-retry-1-prepare"); !dlc.IsNotFound(err) {
		t.Errorf("the retry ran prepare again: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "prepare-runs")); err != nil || string(data) != "run\n" {
		t.Errorf("prepare ran %q (%v), want once", data, err)
	}
	// train reran, with the reused outputs and metrics.
	train, err := c.GetJob(ctx, ws, "rr-retry-1-train")
	if err != nil || train.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("rr-retry-1-train: %v, %v; want Succeeded", train, err)
	}
	want := fmt.Sprintf("data=s3://dlc/workspaces/%s/data/rr rows=42", ws)
	found := false
	for _, r := range jobLogs(t, ctx, ws, "rr-retry-1-train") {
		found = found || strings.Contains(r.Line, want)
	}
	if !found {
		t.Errorf("rr-retry-1-train's logs do not hold %q", want)
	}
	// A run that succeeded is not retried.
	if _, err := c.RetryPipeline(ctx, ws, "rr-retry-1", ""); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("retrying a Succeeded run: %v, want 409", err)
	}
}
