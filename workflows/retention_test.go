package workflows_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// retentionCall is one PruneCheckpoints call, with the phases published before it.
type retentionCall struct {
	In activities.PruneCheckpointsInput
	// SawSucceeded is whether the Succeeded event had been published when the prune
	// ran (the events before it are published asynchronously, so only this one is
	// ordered with the prune).
	SawSucceeded bool
}

// Checkpoint retention: a job that succeeds with spec.checkpoint.keep > 0 has its
// checkpoints pruned to keep before it enters Succeeded; any other end, or keep 0,
// prunes nothing. A prune that fails does not fail the job.
func TestTrainingJobCheckpointRetention(t *testing.T) {
	tests := map[string]struct {
		keep       int32
		fail       bool // a replica fails the job
		pruneErr   error
		wantPhase  schemas.JobPhase
		wantCalls  []retentionCall
		wantPrunes int // calls, retries included
	}{
		"succeeded with keep": {
			keep: 3, wantPhase: schemas.JobSucceeded, wantPrunes: 1,
			wantCalls: []retentionCall{{
				In: activities.PruneCheckpointsInput{URI: "s3://ckpt/wf", Keep: 3, Workspace: "team"},
			}},
		},
		"failed keeps every checkpoint": {keep: 3, fail: true, wantPhase: schemas.JobFailed},
		"keep 0 keeps every checkpoint": {keep: 0, wantPhase: schemas.JobSucceeded},
		"a failed prune does not fail the job": {
			keep: 1, pruneErr: errors.New("S3 unreachable"), wantPhase: schemas.JobSucceeded, wantPrunes: 3,
			wantCalls: []retentionCall{
				{In: activities.PruneCheckpointsInput{URI: "s3://ckpt/wf", Keep: 1, Workspace: "team"}},
				{In: activities.PruneCheckpointsInput{URI: "s3://ckpt/wf", Keep: 1, Workspace: "team"}},
				{In: activities.PruneCheckpointsInput{URI: "s3://ckpt/wf", Keep: 1, Workspace: "team"}},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			job := testJob()
			job.Spec.Checkpoint.Keep = tc.keep
			returnActivity(h.env, jobActs.LaunchGang, activities.LaunchGangResult{Replicas: replicas(schemas.ReplicaPending, schemas.ReplicaPending)}, nil)
			end := replicas(schemas.ReplicaSucceeded, schemas.ReplicaSucceeded)
			if tc.fail {
				end = replicas(schemas.ReplicaFailed, schemas.ReplicaRunning)
				end[0].ExitCode = code(1)
			}
			h.watchSequence(replicas(schemas.ReplicaRunning, schemas.ReplicaRunning), end)
			returnActivityErr(h.env, jobActs.StopGang, nil)
			var calls []retentionCall
			onActivity(h.env, jobActs.PruneCheckpoints, func(_ context.Context, in activities.PruneCheckpointsInput) (activities.PruneCheckpointsResult, error) {
				calls = append(calls, retentionCall{In: in, SawSucceeded: slices.Contains(h.phases, "Succeeded")})
				return activities.PruneCheckpointsResult{Deleted: []int64{1}}, tc.pruneErr
			})
			h.env.ExecuteWorkflow(workflows.TrainingJobWorkflowName, workflows.TrainingJobInput{Job: job})
			st := h.result(t)

			if st.Phase != tc.wantPhase {
				t.Errorf("phase %s (%s), want %s", st.Phase, st.Message, tc.wantPhase)
			}
			if st.LastCheckpoint != "s3://ckpt/wf/000000000010" {
				t.Errorf("last checkpoint %q", st.LastCheckpoint)
			}
			if diff := cmp.Diff(tc.wantCalls, calls); diff != "" {
				t.Errorf("prune calls (-want +got):\n%s", diff)
			}
			if len(calls) != tc.wantPrunes {
				t.Errorf("%d prune calls, want %d", len(calls), tc.wantPrunes)
			}
		})
	}
}
