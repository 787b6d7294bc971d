package activities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/checkpoint"
)

// finderOnly finds checkpoints but cannot prune them.
type finderOnly struct{}

func (finderOnly) Latest(context.Context, string) (string, error) { return "", nil }

// pruner records what it was asked to prune.
type pruner struct {
	finderOnly
	calls   []string
	deleted []int64
	err     error
}

func (p *pruner) Prune(_ context.Context, uri string, keep int) ([]int64, error) {
	p.calls = append(p.calls, fmt.Sprintf("%s keep %d", uri, keep))
	return p.deleted, p.err
}

func TestPruneCheckpoints(t *testing.T) {
	tests := map[string]struct {
		finder      activities.CheckpointFinder
		in          activities.PruneCheckpointsInput
		wantCalls   []string
		wantDeleted []int64
		wantErrType string // "" for no error; "retryable" for a plain error
	}{
		"prunes to keep": {
			finder:      &pruner{deleted: []int64{10, 20}},
			in:          activities.PruneCheckpointsInput{URI: "s3://ckpt/job", Keep: 2},
			wantCalls:   []string{"s3://ckpt/job keep 2"},
			wantDeleted: []int64{10, 20},
		},
		"keep 0 keeps everything": {
			finder: &pruner{},
			in:     activities.PruneCheckpointsInput{URI: "s3://ckpt/job"},
		},
		"no location": {
			finder: &pruner{},
			in:     activities.PruneCheckpointsInput{Keep: 3},
		},
		"a finder that cannot prune": {
			finder: finderOnly{},
			in:     activities.PruneCheckpointsInput{URI: "s3://ckpt/job", Keep: 1},
		},
		"no store": {
			in: activities.PruneCheckpointsInput{URI: "s3://ckpt/job", Keep: 1},
		},
		"invalid location is not retried": {
			finder:      &pruner{err: fmt.Errorf("%w %q: bad bucket", checkpoint.ErrInvalidURI, "s3://X")},
			in:          activities.PruneCheckpointsInput{URI: "s3://X/job", Keep: 1},
			wantCalls:   []string{"s3://X/job keep 1"},
			wantErrType: activities.ErrTypeInvalidSpec,
		},
		"store errors are retried": {
			finder:      &pruner{err: errors.New("connection refused")},
			in:          activities.PruneCheckpointsInput{URI: "s3://ckpt/job", Keep: 1},
			wantCalls:   []string{"s3://ckpt/job keep 1"},
			wantErrType: "retryable",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := &activities.JobActivities{Checkpoints: tc.finder}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.RegisterActivity(a.PruneCheckpoints)
			v, err := env.ExecuteActivity(a.PruneCheckpoints, tc.in)
			switch {
			case tc.wantErrType == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErrType == "retryable" && (err == nil || activities.ErrorType(err) == activities.ErrTypeInvalidSpec):
				t.Errorf("error %v, want a retryable error", err)
			case tc.wantErrType == activities.ErrTypeInvalidSpec && activities.ErrorType(err) != activities.ErrTypeInvalidSpec:
				t.Errorf("error %v, want %s", err, activities.ErrTypeInvalidSpec)
			}
			if err == nil {
				var res activities.PruneCheckpointsResult
				if err := v.Get(&res); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.wantDeleted, res.Deleted); diff != "" {
					t.Errorf("deleted (-want +got):\n%s", diff)
				}
			}
			var calls []string
			if p, ok := tc.finder.(*pruner); ok {
				calls = p.calls
			}
			if diff := cmp.Diff(tc.wantCalls, calls); diff != "" {
				t.Errorf("prune calls (-want +got):\n%s", diff)
			}
		})
	}
}
