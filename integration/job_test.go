package integration

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A 2-replica data-parallel job really runs the example trainer on the local backend,
// reports metrics, leaves a complete checkpoint in S3 and succeeds; the event stream
// holds exactly one event per transition.
func TestTrainerJobSucceedsWithCheckpointInS3(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	uri := fmt.Sprintf("s3://dlc/%s/logreg", ws)
	submit(t, ctx, fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: logreg, workspace: %s, labels: {team: ml}}
spec:
  framework: pytorch
  command: [%q]
  args: [--epochs, "6", --lr, "0.2"]
  roles:
    worker: {replicas: 2, resources: {cpu: "1", memory: 256Mi}}
  checkpoint: {uri: %q, keep: 2}
  timeout: 5m
`, ws, env.trainer, uri))

	j := waitTerminal(t, ctx, ws, "logreg")
	st := j.Status
	if st.Phase != schemas.JobSucceeded {
		t.Fatalf("phase = %s (%s: %s), want Succeeded", st.Phase, st.Reason, st.Message)
	}
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, phaseList(st)); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if len(st.Replicas) != 2 {
		t.Fatalf("replicas = %+v, want 2", st.Replicas)
	}
	for _, r := range st.Replicas {
		if r.Phase != schemas.ReplicaSucceeded || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Errorf("replica %s: %s exit %v", r.Name, r.Phase, r.ExitCode)
		}
	}

	// The checkpoint is in S3, complete (manifest written), and is what status reports.
	latest, err := env.store.Latest(ctx, uri)
	if err != nil {
		t.Fatalf("no checkpoint in S3: %v", err)
	}
	if latest.Ref != st.LastCheckpoint || st.LastCheckpoint == "" {
		t.Errorf("status checkpoint %q, S3 latest %q", st.LastCheckpoint, latest.Ref)
	}
	all, err := env.store.List(ctx, uri)
	if err != nil || len(all) != 2 {
		t.Errorf("checkpoints kept = %d (err %v), want 2 (keep: 2)", len(all), err)
	}
	if _, files, err := env.store.Load(ctx, latest.Ref); err != nil || len(files) == 0 {
		t.Errorf("load %s: %d files, err %v", latest.Ref, len(files), err)
	}

	// Metrics were printed per epoch by rank 0 and forwarded with the logs.
	var metrics []map[string]float64
	for _, r := range jobLogs(t, ctx, ws, "logreg") {
		if vals, ok := events.ParseMetricLine(r.Line); ok && r.Index == 0 {
			metrics = append(metrics, vals)
		}
	}
	if len(metrics) != 6 {
		t.Fatalf("metric lines from worker-0 = %d, want 6 (one per epoch)", len(metrics))
	}
	if acc := metrics[len(metrics)-1]["accuracy"]; acc < 0.8 {
		t.Errorf("final accuracy %.3f, want >= 0.8", acc)
	}

	evs := statusEvents(t, ctx, ws, "logreg")
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, phasesOf(evs)); diff != "" {
		t.Errorf("status events (-want +got):\n%s", diff)
	}
	for i, e := range evs {
		if e.Seq != i+1 || e.UID != j.UID {
			t.Errorf("event %d: seq %d uid %s", i, e.Seq, e.UID)
		}
	}
	// training_job_succeeded.json was recorded before workspace-local-activity and
	// replays its old branch; this records the new one.
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "logreg"), "training_job_workspace_local.json")
}

// A replica that exits non-zero fails the job, with the exit code in status and in the
// Failed event.
func TestFailingProcessEndsFailedWithExitCode(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	st := runJob(t, ctx, ws, "crash", `
  framework: custom
  command: [sh, -c, 'echo about to fail; exit 3']
  roles:
    worker: {replicas: 1}
`).Status
	if st.Phase != schemas.JobFailed || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Fatalf("status = %s exit %v (%s), want Failed with exit code 3", st.Phase, st.ExitCode, st.Message)
	}
	if !strings.Contains(st.Message, "exit code 3") {
		t.Errorf("message %q does not mention the exit code", st.Message)
	}
	evs := statusEvents(t, ctx, ws, "crash")
	last := evs[len(evs)-1]
	if last.Phase != "Failed" || last.ExitCode == nil || *last.ExitCode != 3 {
		t.Errorf("last event = %+v, want Failed with exit code 3", last)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "crash"), "training_job_failed.json")
}

// Stop mid-run kills every process of the gang and ends the job Stopped.
func TestStopKillsEveryProcess(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	submit(t, ctx, itest.JobDoc("sleeper", ws, `
  framework: pytorch
  command: [sh, -c, 'echo pid=$$; exec sleep 600']
  roles:
    master: {replicas: 1}
    worker: {replicas: 2}
`))
	waitFor(t, ctx, ws, "sleeper", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })

	// Collect each replica's pid from its first log line.
	pids := map[string]int{}
	for len(pids) < 3 {
		for _, r := range jobLogs(t, ctx, ws, "sleeper") {
			if v, ok := strings.CutPrefix(r.Line, "pid="); ok {
				pid, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				pids[r.Replica] = pid
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("pids seen: %v", pids)
		}
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("replica %s (pid %d) not running before stop: %v", name, pid, err)
		}
	}

	res, err := env.api.StopJob(ctx, ws, "sleeper", "test stop")
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	if res.Phase != schemas.JobStopped {
		t.Fatalf("stop returned %s, want Stopped", res.Phase)
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("replica %s (pid %d) still exists after stop: %v", name, pid, err)
		}
	}
	j, err := env.api.GetJob(ctx, ws, "sleeper")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range j.Status.Replicas {
		if r.Phase != schemas.ReplicaStopped {
			t.Errorf("replica %s is %s, want Stopped", r.Name, r.Phase)
		}
	}
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Stopped"}, phasesOf(statusEvents(t, ctx, ws, "sleeper"))); diff != "" {
		t.Errorf("status events (-want +got):\n%s", diff)
	}
	// Stopping again is harmless and reports the final phase.
	if res, err := env.api.StopJob(ctx, ws, "sleeper", ""); err != nil || res.Phase != schemas.JobStopped {
		t.Errorf("second stop = %+v, %v", res, err)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "sleeper"), "training_job_stopped.json")
}

// A spec with five mistakes is refused by the API with the same five field-path errors
// that local validation gives, and nothing is created: no workflow, no event, no process.
func TestInvalidSpecCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	data, err := os.ReadFile("../schemas/testdata/five-mistakes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	job, err := schemas.DecodeTrainingJob(data)
	if err == nil {
		err = job.Validate().Err()
	}
	var list schemas.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("local validation: %v, want an ErrorList", err)
	}
	for _, fe := range list {
		want = append(want, fe.Error())
	}
	if len(want) != 5 {
		t.Fatalf("local validation found %d problems, want 5: %v", len(want), want)
	}

	_, err = env.api.SubmitJob(ctx, data)
	var apiErr *dlc.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("submit error = %v, want an API error", err)
	}
	if apiErr.Status != http.StatusUnprocessableEntity || apiErr.API.Code != api.CodeInvalidSpec {
		t.Errorf("status %d code %s, want 422 InvalidSpec", apiErr.Status, apiErr.API.Code)
	}
	var got []string
	for _, d := range apiErr.API.Details {
		got = append(got, d.Error())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("API errors differ from local validation (-local +api):\n%s", diff)
	}

	// Nothing was created. The document's own name and workspace, where readable, are
	// where anything would have appeared.
	ws, name := job.Metadata.Workspace, job.Metadata.Name
	if ws == "" {
		ws = schemas.DefaultWorkspace
	}
	if _, err := env.temporal.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(ws, name), ""); err == nil {
		t.Errorf("a workflow exists for %s/%s", ws, name)
	}
	if last, err := env.events.LastMsg(ctx, jetstream.EventsStream, events.JobStatusSubject(ws, name)); err != nil || last != nil {
		t.Errorf("a status event exists for %s/%s (err %v)", ws, name, err)
	}
	matches, _ := filepath.Glob(filepath.Join(env.e.Dir, "local", fmt.Sprintf("%s.%s.*", ws, name)))
	if len(matches) != 0 {
		t.Errorf("local backend state exists: %v", matches)
	}
	// Dry-run validation through the API gives the same answer.
	if err := env.api.Validate(ctx, data); !errors.As(err, &apiErr) || len(apiErr.API.Details) != 5 {
		t.Errorf("validate = %v, want the five errors", err)
	}
}

// Jobs are listed per workspace through Temporal visibility, and delete removes them.
func TestListAndDelete(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	for _, name := range []string{"one", "two"} {
		submit(t, ctx, itest.JobDoc(name, ws, `
  framework: custom
  command: ["true"]
  roles: {worker: {replicas: 1}}
`))
	}
	for _, name := range []string{"one", "two"} {
		if st := waitTerminal(t, ctx, ws, name).Status; st.Phase != schemas.JobSucceeded {
			t.Fatalf("%s: %s %s", name, st.Phase, st.Message)
		}
	}
	// A duplicate name is refused while the job exists.
	_, err := env.api.SubmitJob(ctx, []byte(fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob",
"metadata":{"name":"one","workspace":%q},"spec":{"framework":"custom","command":["true"],"roles":{"worker":{"replicas":1}}}}`, ws)))
	var apiErr *dlc.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("duplicate submit = %v, want 409", err)
	}

	listed := func() map[string]schemas.JobPhase {
		l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]schemas.JobPhase{}
		for _, it := range l.Items {
			m[it.Name] = it.Phase
		}
		return m
	}
	want := map[string]schemas.JobPhase{"one": schemas.JobSucceeded, "two": schemas.JobSucceeded}
	for cmp.Diff(want, listed()) != "" {
		if ctx.Err() != nil {
			t.Fatalf("list = %v, want %v", listed(), want)
		}
	}
	if l, _ := env.api.ListJobs(ctx, "other-workspace", dlc.ListOptions{}); l == nil || len(l.Items) != 0 {
		t.Errorf("another workspace lists %v", l)
	}

	if err := env.api.DeleteJob(ctx, ws, "one"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := env.api.GetJob(ctx, ws, "one"); !dlc.IsNotFound(err) {
		t.Errorf("get after delete = %v, want not found", err)
	}
	if err := env.api.DeleteJob(ctx, ws, "one"); !dlc.IsNotFound(err) {
		t.Errorf("second delete = %v, want not found", err)
	}
}

// Replicas that finish before the worker first observes them still take the job
// through Running to Succeeded, in the timeline and in the event stream. The launch's
// first result is lost, so the retried (idempotent) launch, a second later, launches
// nothing and first sees the replicas already finished.
func TestFastReplicasPassThroughRunning(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	env.faults.failAfter("/"+ws+"/", workflows.ActivityLaunchGang, 1)
	st := runJob(t, ctx, ws, "quick", `
  framework: custom
  command: ["true"]
  roles: {worker: {replicas: 2}}
`).Status
	want := []string{"Pending", "Launching", "Running", "Succeeded"}
	if diff := cmp.Diff(want, phaseList(st)); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if st.Timeline[2].Reason != "AllReplicasRan" {
		t.Errorf("Running reason %q, want AllReplicasRan (the replicas were first seen finished)", st.Timeline[2].Reason)
	}
	if diff := cmp.Diff(want, phasesOf(statusEvents(t, ctx, ws, "quick"))); diff != "" {
		t.Errorf("status events (-want +got):\n%s", diff)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "quick"), "training_job_fast_replicas.json")
}

// A job with a placement timeout that is placed in time runs as any other (the timer is
// cancelled once every replica runs).
func TestPlacedInTimeRunsNormally(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	st := runJob(t, ctx, ws, "placed", `
  framework: pytorch
  command: [sh, -c, 'echo rank $RANK; sleep 1']
  resources: {placementTimeout: 1m}
  roles: {worker: {replicas: 2}}
`).Status
	if st.Phase != schemas.JobSucceeded || st.Attempt != 0 {
		t.Fatalf("status %s attempt %d: %s", st.Phase, st.Attempt, st.Message)
	}
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, phaseList(st)); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "placed"), "training_job_placement_in_time.json")
}
