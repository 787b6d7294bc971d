package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A pipeline fans out on the real stack: grid runs one job per item of withItems (4,
// at most 2 at once: each job counts the jobs running beside it in a shared directory),
// each runs one job per item of list's output (withParam, a JSON list of objects,
// ${item.key}), and report reads both steps' outputs.jobs.
func TestPipelineFanOutRunsItemsWithParallelism(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api
	dir := t.TempDir()
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: fan, workspace: %[1]s}
spec:
  params: [{name: shards, default: '[{"key":"s1"},{"key":"s2"}]'}]
  steps:
    - name: list
      outputs: {shards: "${params.shards}"}
      job: {framework: custom, command: [sh, -c, 'echo listed'], roles: {worker: {replicas: 1}}}
    - name: grid
      withItems: [a, b, c, d]
      parallelism: 2
      job:
        framework: custom
        command:
          - sh
          - -c
          - 'mkdir -p %[2]s/running; touch %[2]s/running/$1; ls %[2]s/running | wc -l >> %[2]s/seen; echo "$1" >> %[2]s/items; sleep 2; rm %[2]s/running/$1'
          - grid
          - "${item}"
        roles: {worker: {replicas: 1}}
    - name: each
      dependsOn: [list]
      withParam: "${steps.list.outputs.shards}"
      job: {framework: custom, command: [sh, -c, 'echo "key=$1"', each, "${item.key}"], roles: {worker: {replicas: 1}}}
    - name: report
      dependsOn: [grid, each]
      job: {framework: custom, command: [sh, -c, 'echo "grid=$1 each=$2"', report, "${steps.grid.outputs.jobs}", "${steps.each.outputs.jobs}"], roles: {worker: {replicas: 1}}}
`, ws, dir)
	if _, err := c.RunPipeline(ctx, []byte(doc), nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitPipeline(ctx, ws, "fan", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status
	t.Logf("run %s: %s", st.Phase, st.Message)
	if diff := cmp.Diff([]string{"list:Succeeded", "grid:Succeeded", "each:Succeeded", "report:Succeeded"}, stepsOf(st)); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	recordHistory(t, ctx, workflows.PipelineWorkflowID(ws, "fan"), "pipeline_fan_out.json")

	// Every item ran once, in its own job, and never more than two at once.
	items, err := os.ReadFile(filepath.Join(dir, "items"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(items))
	slices.Sort(got)
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, got); diff != "" {
		t.Errorf("items run (-want +got):\n%s", diff)
	}
	seen, err := os.ReadFile(filepath.Join(dir, "seen"))
	if err != nil {
		t.Fatal(err)
	}
	for f := range strings.FieldsSeq(string(seen)) {
		if n, err := strconv.Atoi(f); err != nil || n < 1 || n > 2 {
			t.Errorf("a grid job saw %q jobs running (all: %q), want 1 or 2", f, seen)
		}
	}
	grid := st.Step("grid")
	for k, item := range []string{"a", "b", "c", "d"} {
		name := schemas.StepItemJobName("fan", "grid", k)
		if ch := grid.Children[k]; ch.Index != k || ch.Job != name || ch.Phase != schemas.StepSucceeded || ch.JobUID == "" {
			t.Errorf("grid child %d: %+v", k, ch)
		}
		j, err := c.GetJob(ctx, ws, name)
		if err != nil || j.Status.Phase != schemas.JobSucceeded || j.Spec.Metadata.Labels[schemas.LabelPipelineItem] != strconv.Itoa(k) ||
			!slices.Contains(j.Spec.Spec.Command, item) {
			t.Errorf("%s: %+v, %v", name, j, err)
		}
	}
	wantGrid := `["fan-grid-0","fan-grid-1","fan-grid-2","fan-grid-3"]`
	wantEach := `["fan-each-0","fan-each-1"]`
	if grid.Outputs[schemas.OutputJobs] != wantGrid || st.Step("each").Outputs[schemas.OutputJobs] != wantEach {
		t.Errorf("outputs: grid %v, each %v", grid.Outputs, st.Step("each").Outputs)
	}
	for k, key := range []string{"s1", "s2"} {
		if !logsHold(t, ws, schemas.StepItemJobName("fan", "each", k), "key="+key) {
			t.Errorf("fan-each-%d's logs do not hold key=%s", k, key)
		}
	}
	if !logsHold(t, ws, "fan-report", "grid="+wantGrid+" each="+wantEach) {
		t.Errorf("fan-report's logs do not hold both lists of jobs")
	}
}

// A failing child fails its fan-out step on the real stack: its running sibling is
// stopped (Cancelled), the item not yet started is Skipped, and the run fails.
func TestPipelineFanOutFailingChildFailsTheStep(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: fanfail, workspace: %s}
spec:
  steps:
    - name: fan
      withItems: [bad, slow, never]
      parallelism: 2
      job:
        framework: custom
        command: [sh, -c, 'if [ "$1" = bad ]; then exit 3; fi; sleep 600', fan, "${item}"]
        roles: {worker: {replicas: 1}}
        faultTolerance: {maxRestarts: 0}
`, ws)
	if _, err := c.RunPipeline(ctx, []byte(doc), nil); err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitPipeline(ctx, ws, "fanfail", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := p.Status
	s := st.Step("fan")
	t.Logf("run %s: %s", st.Phase, st.Message)
	if st.Phase != schemas.PipelineFailed || s.Phase != schemas.StepFailed || s.Reason != workflows.ReasonChildFailed ||
		!strings.HasPrefix(s.Message, "item 0: job fanfail-fan-0 failed") {
		t.Fatalf("run %s; fan %+v", st.Phase, s)
	}
	var phases []schemas.StepPhase
	for _, ch := range s.Children {
		phases = append(phases, ch.Phase)
	}
	if diff := cmp.Diff([]schemas.StepPhase{schemas.StepFailed, schemas.StepCancelled, schemas.StepSkipped}, phases); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
	if j, err := c.GetJob(ctx, ws, "fanfail-fan-1"); err != nil || j.Status.Phase != schemas.JobStopped {
		t.Errorf("fanfail-fan-1: %+v, %v; want Stopped", j, err)
	}
	if _, err := c.GetJob(ctx, ws, "fanfail-fan-2"); !dlc.IsNotFound(err) {
		t.Errorf("fanfail-fan-2: %v, want never started (404)", err)
	}
	// dlc pipeline get lists the children under their step.
	dlcCmd := itest.CLI{Bin: dlcBinary(t), Server: env.e.APIURL, Token: env.e.AdminToken, Workspace: ws}.Runner(ctx)
	out, err := dlcCmd("pipeline", "get", "fanfail")
	if err != nil {
		t.Fatalf("dlc pipeline get: %v\n%s", err, out)
	}
	for _, want := range []string{`\[0\]\s+Failed\s+fanfail-fan-0\s+job fanfail-fan-0 failed`, `\[1\]\s+Cancelled\s+fanfail-fan-1`, `\[2\]\s+Skipped\s+fanfail-fan-2`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("dlc pipeline get does not match %s:\n%s", want, out)
		}
	}
	// Deleting the run deletes its children's jobs.
	if err := c.DeletePipeline(ctx, ws, "fanfail"); err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"fanfail-fan-0", "fanfail-fan-1"} {
		if _, err := c.GetJob(ctx, ws, job); !dlc.IsNotFound(err) {
			t.Errorf("%s after the run's delete: %v, want 404", job, err)
		}
	}
}

// logsHold reports whether a job's logs hold want.
func logsHold(t *testing.T, ws, job, want string) bool {
	t.Helper()
	for _, r := range jobLogs(t, testContext(t), ws, job) {
		if strings.Contains(r.Line, want) {
			return true
		}
	}
	return false
}

// A worker SIGKILLed while a fan-out step runs loses and duplicates nothing: a new
// worker carries the step on from its history, every item runs exactly once, in order
// (parallelism 1), and the step succeeds.
func TestPipelineFanOutSurvivesAWorkerKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e, stateDir, first := workerStack(t, ctx) // its own stack: no other worker polls its queue
	c := itest.AdminClient(t, e)
	dir := t.TempDir()
	ws := "fanrestart"
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: fank, workspace: %s}
spec:
  steps:
    - name: fan
      withItems: [a, b, c]
      parallelism: 1
      job: {framework: custom, command: [sh, -c, 'echo "$1" >> %s/items; sleep 2', fan, "${item}"], roles: {worker: {replicas: 1}}}
`, ws, dir)
	if _, err := c.RunPipeline(ctx, []byte(doc), nil); err != nil {
		t.Fatal(err)
	}
	// Kill the worker once the first child runs.
	testutil.Eventually(t, itest.Left(ctx), "the first child to run", func() bool {
		p, err := c.GetPipeline(ctx, ws, "fank")
		if err != nil {
			return false
		}
		s := p.Status.Step("fan")
		return s != nil && len(s.Children) == 3 && s.Children[0].Phase == schemas.StepRunning
	}, 20*time.Millisecond)
	first.kill()
	startWorker(t, e, stateDir)

	p, err := c.WaitPipeline(ctx, ws, "fank", 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("run %s: %s", p.Status.Phase, p.Status.Message)
	}
	items, err := os.ReadFile(filepath.Join(dir, "items"))
	if err != nil || string(items) != "a\nb\nc\n" {
		t.Errorf("items run %q (%v), want a, b, c once each in order", items, err)
	}
	if got := p.Status.Step("fan").Outputs[schemas.OutputJobs]; got != `["fank-fan-0","fank-fan-1","fank-fan-2"]` {
		t.Errorf("outputs.jobs = %s", got)
	}
}
