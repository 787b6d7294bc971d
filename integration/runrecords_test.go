package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// TestRunRecordsOutliveTheirWorkflows runs the same scenario on the embedded default
// (the shared stack: Temporal's dev server, records in SQLite) and on PostgreSQL (the
// Temporal server on PostgreSQL, records in a database of their own on the same
// server): a job that fails on its first attempt and succeeds on its second, leaving a
// checkpoint, and a pipeline run of one job step. Once they have ended, their closed
// workflows are deleted from Temporal, as the namespace's retention deletes them
// (the Temporal server refuses a retention under one hour, namespace_handler.go's
// validateRetentionDuration, so the test does not wait for the timer; it asserts that
// Temporal no longer knows them). The API then still answers their records: the
// job's two attempts with their reasons and nodes, the checkpoint's lineage to the
// job, the pipeline run's step by parent, and usage equal to the attempts' running
// times multiplied by what the replicas asked for.
func TestRunRecordsOutliveTheirWorkflows(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		if !strings.HasPrefix(env.e.RunsDatabase, "sqlite:") {
			t.Fatalf("the shared stack keeps its records in %q, want the embedded default, SQLite", env.e.RunsDatabase)
		}
		runRecordScenario(t, ctx, env.e, env.api, env.temporal, workspace(t), func(id string) {
			if strings.Contains(id, "/job/train") {
				recordHistory(t, ctx, id, "run_record_job.json")
			}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		ctx := itest.Context(t, 8*time.Minute)
		e := itest.StartStack(t, ctx, embedded.Config{Dir: filepath.Join(itest.PostgresDir(t), "stack"), TemporalOnPostgres: true, WorkDir: env.dir})
		if !strings.HasPrefix(e.RunsDatabase, "postgres://") {
			t.Fatalf("the stack on PostgreSQL keeps its records in %q, want its PostgreSQL", e.RunsDatabase)
		}
		tc, err := client.Dial(client.Options{HostPort: e.Stack.Temporal.Address, Namespace: e.Stack.Temporal.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		runRecordScenario(t, ctx, e, itest.AdminClient(t, e), tc, "records-pg", func(string) {})
	})
}

// runRecordScenario runs the scenario on a stack; record is called with each closed
// workflow's id before Temporal forgets it (to record its history).
func runRecordScenario(t *testing.T, ctx context.Context, e *embedded.Embedded, c *dlc.Client, tc client.Client, ws string, record func(id string)) {
	model := fmt.Sprintf("s3://dlc/%s/model", ws)
	itest.Submit(t, ctx, c, itest.JobDoc("train", ws, fmt.Sprintf(`
  framework: pytorch
  command: [%q]
  args: [--epochs, "4", --fail-at-epoch, "2", --fail-attempt, "0", --exit-code, "3"]
  roles:
    worker: {replicas: 2, resources: {cpu: 500m, memory: 128Mi}}
  checkpoint: {uri: %q}
  faultTolerance: {maxRestarts: 1}
  timeout: 5m
`, env.trainer, model)))
	job := itest.WaitJob(t, ctx, c, ws, "train", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if job.Status.Phase != schemas.JobSucceeded || len(job.Status.Attempts) != 2 {
		t.Fatalf("job train ended %s with %d attempts (%s), want Succeeded after 2", job.Status.Phase, len(job.Status.Attempts), job.Status.Message)
	}
	if _, err := c.RunPipeline(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: loop, workspace: %s, labels: {team: ml}}
spec:
  steps:
    - name: eval
      job: {framework: custom, command: [sh, -c, 'echo evaluated'], roles: {worker: {replicas: 1}}}
`, ws)), nil); err != nil {
		t.Fatal(err)
	}
	var run *api.PipelineRun
	testutil.Eventually(t, 3*time.Minute, "the pipeline run to end", func() error {
		var err error
		if run, err = c.GetPipeline(ctx, ws, "loop"); err != nil {
			return err
		}
		if !run.Status.Phase.Terminal() {
			return fmt.Errorf("phase %s", run.Status.Phase)
		}
		return nil
	})
	if run.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("pipeline loop ended %s: %s", run.Status.Phase, run.Status.Message)
	}
	step := schemas.StepJobName("loop", "eval")

	// Each workflow writes its record before it closes; then Temporal forgets them.
	for _, id := range []string{workflows.JobWorkflowID(ws, "train"), workflows.PipelineWorkflowID(ws, "loop"), workflows.JobWorkflowID(ws, step)} {
		if err := tc.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
			t.Fatalf("workflow %s: %v", id, err)
		}
		record(id)
		forgetWorkflow(t, ctx, tc, e.Stack.Temporal.Namespace, id)
	}
	if _, err := c.GetJob(ctx, ws, "train"); !dlc.IsNotFound(err) {
		t.Fatalf("GET job train once Temporal forgot it: %v, want not found", err)
	}

	// The job's record: both attempts, how the first ended, where they ran.
	page, err := c.History(ctx, ws, dlc.HistoryQuery{Kind: runs.KindJob, Name: "train"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 {
		t.Fatalf("history of job train: %d records, want 1: %+v", len(page.Records), page.Records)
	}
	rec := page.Records[0]
	if rec.UID != job.UID || rec.Phase != "Succeeded" || rec.Origin.Kind != runs.OriginUser || rec.SubmittedBy == "" {
		t.Errorf("record: uid %s phase %s origin %+v submittedBy %q; want %s, Succeeded, User, the admin token", rec.UID, rec.Phase, rec.Origin, rec.SubmittedBy, job.UID)
	}
	if len(rec.Attempts) != 2 || rec.Attempts[0].Outcome != string(schemas.JobRestarting) || rec.Attempts[0].Reason != string(schemas.FailureError) ||
		rec.Attempts[1].Outcome != "" && rec.Attempts[1].Outcome != string(schemas.JobSucceeded) {
		t.Errorf("attempts = %+v, want a failed (Error, Restarting) attempt and a succeeded one", rec.Attempts)
	}
	for _, a := range rec.Attempts {
		if len(a.Nodes) == 0 {
			t.Errorf("attempt %d names no node", a.Attempt)
		}
	}
	if rec.Checkpoint == "" || rec.Checkpoint != job.Status.LastCheckpoint || rec.Demand.CPU != 1 || rec.Demand.MemoryBytes != 256<<20 {
		t.Errorf("record checkpoint %q (status %q), demand %+v; want the status's checkpoint, 1 core and 256 MiB", rec.Checkpoint, job.Status.LastCheckpoint, rec.Demand)
	}
	// A cursor the store did not make is the caller's error, naming the parameter.
	_, err = c.History(ctx, ws, dlc.HistoryQuery{After: "bm90LWEtY3Vyc29y"})
	var apiErr *dlc.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Error(), "after") {
		t.Errorf("history with a cursor the store did not make: %v, want 400 naming after", err)
	}
	if got, err := c.HistoryRecord(ctx, ws, runs.KindJob, job.UID); err != nil || got.UID != job.UID || len(got.Spec) == 0 {
		t.Errorf("history record %s: %v (%v), want the record with its spec", job.UID, got, err)
	}

	// The CLI reads the same record and usage through the API.
	dlcJSON := func(out any, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, dlcBinary(t), append([]string{"--server", e.APIURL, "-o", "json"}, args...)...)
		cmd.Env = append(os.Environ(), "DLC_TOKEN="+e.AdminToken)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("dlc %s: %v", strings.Join(args, " "), err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("dlc %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	var cliPage runs.Page
	dlcJSON(&cliPage, "-w", ws, "history", "--kind", "job", "--name", "train")
	if len(cliPage.Records) != 1 || cliPage.Records[0].UID != job.UID || len(cliPage.Records[0].Attempts) != 2 {
		t.Errorf("dlc history --name train: %+v, want the job's run with its 2 attempts", cliPage.Records)
	}

	// Lineage: the checkpoint's run; the pipeline run's step by its parent.
	lin, err := c.Lineage(ctx, ws, dlc.LineageQuery{Checkpoint: model})
	if err != nil {
		t.Fatal(err)
	}
	if len(lin.Records) != 1 || lin.Records[0].UID != job.UID {
		t.Errorf("lineage of %s: %+v, want job train's run", model, lin.Records)
	}
	steps, err := c.History(ctx, ws, dlc.HistoryQuery{Parent: run.UID})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps.Records) != 1 || steps.Records[0].Name != step || steps.Records[0].Origin.Kind != runs.OriginPipeline || steps.Records[0].Origin.Step != "eval" {
		t.Errorf("runs of pipeline run %s: %+v, want its step eval's job", run.UID, steps.Records)
	}
	pipe, err := c.History(ctx, ws, dlc.HistoryQuery{Kind: runs.KindPipeline, Labels: []string{"team=ml"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pipe.Records) != 1 || pipe.Records[0].UID != run.UID || pipe.Records[0].Phase != "Succeeded" {
		t.Errorf("pipeline records labelled team=ml: %+v, want run loop", pipe.Records)
	}

	// Usage: the attempts' running times (as the job's status gave them before Temporal
	// forgot it) times 1 core and 256 MiB.
	var hours float64
	for _, a := range job.Status.Attempts {
		end := job.Status.FinishTime
		if a.EndTime != nil {
			end = a.EndTime
		}
		hours += end.Sub(a.StartTime).Hours()
	}
	use, err := c.Usage(ctx, dlc.UsageQuery{Workspaces: []string{ws}})
	if err != nil {
		t.Fatal(err)
	}
	var cpu, mem, gpu float64
	for _, r := range use.Rows {
		cpu, mem, gpu = cpu+r.CPUHours, mem+r.MemoryGiBHours, gpu+r.GPUHours
	}
	if hours <= 0 || math.Abs(cpu-hours) > 1e-9 || math.Abs(mem-hours/4) > 1e-9 || gpu != 0 {
		t.Errorf("usage of %s: %.9f CPU-h, %.9f GiB-h, %g GPU-h; want %.9f, %.9f and 0 (rows %+v)", ws, cpu, mem, gpu, hours, hours/4, use.Rows)
	}
	var cliUse api.Usage
	dlcJSON(&cliUse, "usage", "-w", ws)
	var cliCPU float64
	for _, r := range cliUse.Rows {
		cliCPU += r.CPUHours
	}
	if math.Abs(cliCPU-cpu) > 1e-9 {
		t.Errorf("dlc usage -w %s: %.9f CPU-h, want the API's %.9f", ws, cliCPU, cpu)
	}
}

// forgetWorkflow deletes a closed workflow's execution, as the namespace's retention
// does, and waits until Temporal no longer knows it.
func forgetWorkflow(t *testing.T, ctx context.Context, tc client.Client, namespace, id string) {
	t.Helper()
	if _, err := tc.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id},
	}); err != nil {
		t.Fatalf("delete workflow %s: %v", id, err)
	}
	testutil.Eventually(t, time.Minute, "Temporal to forget workflow "+id, func() error {
		_, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err == nil {
			return errors.New("still described")
		}
		if _, ok := errors.AsType[*serviceerror.NotFound](err); !ok {
			return err
		}
		return nil
	})
}

// Deleting a job keeps its run record; purging it removes the record. Deleting a
// pipeline run removes its record and its steps' records.
func TestPurgeRemovesRunRecords(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 5*time.Minute) // two runs, a purge and a pipeline's delete
	ws := workspace(t)
	c := env.api
	records := func(q dlc.HistoryQuery) []runs.Record {
		t.Helper()
		page, err := c.History(ctx, ws, q)
		if err != nil {
			t.Fatal(err)
		}
		return page.Records
	}
	ended := func(kind runs.Kind, name string) {
		t.Helper()
		testutil.Eventually(t, 2*time.Minute, "the record of "+name, func() error {
			if n := len(records(dlc.HistoryQuery{Kind: kind, Name: name})); n != 1 {
				return fmt.Errorf("%d records", n)
			}
			return nil
		})
	}

	first := itest.Submit(t, ctx, c, itest.ShellJob(ws, "scratch", "echo one"))
	ended(runs.KindJob, "scratch")
	if err := c.DeleteJob(ctx, ws, "scratch"); err != nil {
		t.Fatal(err)
	}
	if got := records(dlc.HistoryQuery{Name: "scratch"}); len(got) != 1 || got[0].UID != first.UID {
		t.Fatalf("after a delete: records %+v, want the run's record kept", got)
	}
	if err := c.PurgeJob(ctx, ws, "scratch"); err != nil {
		t.Fatal(err)
	}
	if got := records(dlc.HistoryQuery{Name: "scratch"}); len(got) != 0 {
		t.Fatalf("after a purge: records %+v, want none", got)
	}

	if _, err := c.RunPipeline(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: gone, workspace: %s}
spec:
  steps:
    - name: only
      job: {framework: custom, command: [sh, -c, 'echo step'], roles: {worker: {replicas: 1}}}
`, ws)), nil); err != nil {
		t.Fatal(err)
	}
	ended(runs.KindPipeline, "gone")
	ended(runs.KindJob, schemas.StepJobName("gone", "only"))
	if err := c.DeletePipeline(ctx, ws, "gone"); err != nil {
		t.Fatal(err)
	}
	if got := records(dlc.HistoryQuery{}); len(got) != 0 {
		t.Fatalf("after deleting the pipeline run: records %+v, want none (its own and its step's gone)", got)
	}
}

// The records' own retention: the API process expires a record once its run finished
// longer ago than the retention, while Temporal still keeps the run.
func TestRunRecordRetention(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 4*time.Minute)
	const retention = 20 * time.Second
	e := itest.StartStack(t, ctx, embedded.Config{Dir: filepath.Join(t.TempDir(), "stack"), WorkDir: env.dir,
		RunsRetention: retention, RunsSweepEvery: time.Second})
	c := itest.AdminClient(t, e)
	const ws = "records-retention"
	job := itest.Submit(t, ctx, c, itest.ShellJob(ws, "short", "echo done"))
	count := func() int {
		page, err := c.History(ctx, ws, dlc.HistoryQuery{Name: "short"})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Records)
	}
	testutil.Eventually(t, retention, "the job's record", func() error {
		if n := count(); n != 1 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	testutil.Eventually(t, time.Minute, "the record to expire", func() error {
		if n := count(); n != 0 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	got, err := c.GetJob(ctx, ws, "short")
	if err != nil || got.UID != job.UID || got.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("the job after its record expired: %+v (%v), want it still in Temporal, Succeeded", got, err)
	}
	if age := time.Since(*got.Status.FinishTime); age < retention {
		t.Errorf("the record expired %s after the run finished, before the %s retention", age, retention)
	}
}
