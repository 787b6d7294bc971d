package activities_test

import (
	"context"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/storage"
)

// locations gives every workspace w the location s3://dlc/workspaces/w/.
type locations struct{}

func (locations) Locations(_ context.Context, ws string) ([]storage.Location, error) {
	return []storage.Location{{Bucket: "dlc", Prefix: "workspaces/" + ws + "/"}}, nil
}

// latest records what it was asked to look up.
type latest struct {
	pruner
	looked []string
}

func (l *latest) Latest(_ context.Context, uri string) (string, error) {
	l.looked = append(l.looked, uri)
	return uri + "/000000000001", nil
}

// With storage locations, the worker prunes (with its own credentials) only inside the
// job's workspace: a keep: 1 on another workspace's prefix, on a key that climbs out
// with "..", or of a job recorded without its workspace deletes nothing.
func TestPruneOnlyInsideTheWorkspace(t *testing.T) {
	for name, tc := range map[string]struct {
		in        activities.PruneCheckpointsInput
		wantCalls int
	}{
		"own prefix":         {activities.PruneCheckpointsInput{URI: "s3://dlc/workspaces/a/ckpt", Keep: 1, Workspace: "a"}, 1},
		"another's prefix":   {activities.PruneCheckpointsInput{URI: "s3://dlc/workspaces/b/ckpt", Keep: 1, Workspace: "a"}, 0},
		"climbing out":       {activities.PruneCheckpointsInput{URI: "s3://dlc/workspaces/a/../b/ckpt", Keep: 1, Workspace: "a"}, 0},
		"the bucket's root":  {activities.PruneCheckpointsInput{URI: "s3://dlc/workspaces", Keep: 1, Workspace: "a"}, 0},
		"workspace unknown":  {activities.PruneCheckpointsInput{URI: "s3://dlc/workspaces/a/ckpt", Keep: 1}, 0},
		"another's by owner": {activities.PruneCheckpointsInput{URI: "s3://dlc/workspaces/b/ckpt", Keep: 1, Workspace: "b"}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			p := &pruner{}
			a := &activities.JobActivities{Checkpoints: p, Storage: locations{}}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.RegisterActivity(a.PruneCheckpoints)
			_, err := env.ExecuteActivity(a.PruneCheckpoints, tc.in)
			if len(p.calls) != tc.wantCalls {
				t.Fatalf("prune calls %v, want %d", p.calls, tc.wantCalls)
			}
			if tc.wantCalls == 0 && activities.ErrorType(err) != activities.ErrTypeInvalidSpec {
				t.Errorf("error %v, want %s (not retried)", err, activities.ErrTypeInvalidSpec)
			}
			if tc.wantCalls == 1 && err != nil {
				t.Errorf("error %v", err)
			}
		})
	}
}

// The last-checkpoint lookup, also with the worker's credentials, does not look outside
// the job's workspace.
func TestLatestCheckpointOnlyInsideTheWorkspace(t *testing.T) {
	l := &latest{}
	a := &activities.JobActivities{Checkpoints: l, Storage: locations{}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a.LatestCheckpoint)
	for _, tc := range []struct {
		in   activities.LatestCheckpointInput
		want string
	}{
		{activities.LatestCheckpointInput{URI: "s3://dlc/workspaces/a/ckpt", Workspace: "a"}, "s3://dlc/workspaces/a/ckpt/000000000001"},
		{activities.LatestCheckpointInput{URI: "s3://dlc/workspaces/b/ckpt", Workspace: "a"}, ""},
	} {
		v, err := env.ExecuteActivity(a.LatestCheckpoint, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := v.Get(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("latest under %s for %s = %q, want %q", tc.in.URI, tc.in.Workspace, got, tc.want)
		}
	}
	if len(l.looked) != 1 {
		t.Errorf("looked under %v, want only a's prefix", l.looked)
	}
}
