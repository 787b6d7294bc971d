package activities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// fullBackend refuses every launch: nothing fits.
type fullBackend struct{ backend.Backend }

func (fullBackend) Launch(context.Context, backend.GangSpec) error {
	return fmt.Errorf("local: %w", backend.InsufficientResources(errors.New("waiting for 3 GPUs: 1 of 4 free")))
}

// A backend's "does not fit yet" reaches the workflow as a non-retryable
// InsufficientResources error with the backend's message: the workflow, not Temporal's
// retry policy, waits (Queued) and launches again.
func TestLaunchGangInsufficientResources(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	a := &activities.JobActivities{Backend: fullBackend{}}
	env.RegisterActivity(a.LaunchGang)
	job := schemas.TrainingJob{
		APIVersion: schemas.APIVersion, Kind: schemas.KindTrainingJob,
		Metadata: schemas.ObjectMeta{Name: "big", Workspace: "ml"},
		Spec: schemas.TrainingJobSpec{Framework: schemas.FrameworkCustom, Command: []string{"train"},
			Roles: map[string]schemas.RoleSpec{"worker": {Replicas: 1, Resources: schemas.Resources{GPU: 3}}}},
	}
	job.Default()
	_, err := env.ExecuteActivity(a.LaunchGang, activities.LaunchGangInput{Job: job,
		Params: backend.GangParams{Ref: backend.GangRef{Workspace: "ml", Job: "big"}, UID: "u"}})
	if activities.ErrorType(err) != activities.ErrTypeInsufficientResources {
		t.Fatalf("error %v: type %q, want %s", err, activities.ErrorType(err), activities.ErrTypeInsufficientResources)
	}
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	if !ok || !appErr.NonRetryable() || appErr.Message() != "local: waiting for 3 GPUs: 1 of 4 free" {
		t.Errorf("application error %v (non-retryable %v)", appErr, ok && appErr.NonRetryable())
	}
}
