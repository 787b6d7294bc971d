package workflows_test

import (
	"context"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
)

// Typed activity mocks. An activity is mocked by its method value (workers.Register*
// registers each under its wire name, and the test environment maps the method to that
// name), with results or a function of the activity's own signature, which the compiler
// checks: no activity names as strings, no untyped return values.

// Method values of the activities, for mocks.
var (
	jobActs        = &activities.JobActivities{}
	quotaActs      = &activities.QuotaActivities{}
	pipelineActs   = &activities.PipelineActivities{}
	experimentActs = &activities.ExperimentActivities{}
	scheduleActs   = &activities.ScheduleActivities{}
)

// onActivity mocks an activity with a function of its signature.
func onActivity[In, Out any](env *testsuite.TestWorkflowEnvironment, activity, fn func(context.Context, In) (Out, error)) *testsuite.MockCallWrapper {
	return env.OnActivity(activity, mock.Anything, mock.Anything).Return(fn)
}

// returnActivity mocks an activity with fixed results.
func returnActivity[In, Out any](env *testsuite.TestWorkflowEnvironment, activity func(context.Context, In) (Out, error), out Out, err error) *testsuite.MockCallWrapper {
	return env.OnActivity(activity, mock.Anything, mock.Anything).Return(out, err)
}

// onActivityErr mocks an activity that returns only an error with a function of its
// signature.
func onActivityErr[In any](env *testsuite.TestWorkflowEnvironment, activity, fn func(context.Context, In) error) *testsuite.MockCallWrapper {
	return env.OnActivity(activity, mock.Anything, mock.Anything).Return(fn)
}

// returnActivityErr mocks an activity that returns only an error with a fixed error.
func returnActivityErr[In any](env *testsuite.TestWorkflowEnvironment, activity func(context.Context, In) error, err error) *testsuite.MockCallWrapper {
	return env.OnActivity(activity, mock.Anything, mock.Anything).Return(err)
}
