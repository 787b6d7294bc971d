package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/schemas"
)

// ErrTypeNoDataSource: a schedule asks for a data check but the worker has no S3 access.
const ErrTypeNoDataSource = "NoDataSource"

// ObjectLister finds objects under an S3 prefix (checkpoint.Store implements it).
type ObjectLister interface {
	// FirstModifiedAfter returns the first object under uri (s3://bucket/prefix) modified
	// strictly after t; found is false when there is none.
	FirstModifiedAfter(ctx context.Context, uri string, t time.Time) (key string, modified time.Time, found bool, err error)
}

// JobControl follows and stops jobs by their workflow id (the worker's Temporal client
// implements it).
type JobControl interface {
	// WaitJob waits until the job's workflow is closed and returns how it ended.
	WaitJob(ctx context.Context, workflowID string) (JobOutcome, error)
	// StopJob stops a job and returns once it is terminal; a job already terminal is not
	// an error.
	StopJob(ctx context.Context, workflowID, reason string) error
}

// JobOutcome is how a job ended.
type JobOutcome struct {
	// Found is false when the job no longer exists (it was deleted).
	Found bool `json:"found"`
	// Phase is the job's terminal phase.
	Phase schemas.JobPhase `json:"phase,omitempty"`
	// LastCheckpoint is the newest checkpoint the job recorded.
	LastCheckpoint string `json:"lastCheckpoint,omitempty"`
	// Message explains the phase.
	Message string `json:"message,omitempty"`
}

// ScheduleActivities are the activities of the Schedule workflow.
type ScheduleActivities struct {
	// Objects lists S3 prefixes for runOptions.skipIfNoNewDataUnder.
	Objects ObjectLister
	// Jobs follows runs started by an earlier run of the schedule workflow (before
	// continue-as-new) and stops runs for the cancelOther overlap policy.
	Jobs JobControl
}

// CheckNewDataInput asks whether data arrived under a prefix.
type CheckNewDataInput struct {
	// URI is s3://bucket/prefix.
	URI string `json:"uri"`
	// Since: only objects modified after it count.
	Since time.Time `json:"since"`
}

// CheckNewDataResult says whether new data arrived, and names one new object.
type CheckNewDataResult struct {
	Found    bool      `json:"found"`
	Key      string    `json:"key,omitempty"`
	Modified time.Time `json:"modified,omitzero"`
}

// CheckNewData reports whether an object under in.URI was modified after in.Since.
func (a *ScheduleActivities) CheckNewData(ctx context.Context, in CheckNewDataInput) (CheckNewDataResult, error) {
	defer keepAlive(ctx)()
	if a.Objects == nil {
		return CheckNewDataResult{}, temporal.NewNonRetryableApplicationError(
			"this worker has no S3 configuration to check for new data", ErrTypeNoDataSource, nil)
	}
	key, mod, found, err := a.Objects.FirstModifiedAfter(ctx, in.URI, in.Since)
	if err != nil {
		return CheckNewDataResult{}, err
	}
	return CheckNewDataResult{Found: found, Key: key, Modified: mod}, nil
}

// WaitScheduledJobInput names a job's workflow.
type WaitScheduledJobInput struct {
	WorkflowID string `json:"workflowId"`
}

// WaitScheduledJob waits until a job has ended and returns its outcome.
func (a *ScheduleActivities) WaitScheduledJob(ctx context.Context, in WaitScheduledJobInput) (JobOutcome, error) {
	defer keepAlive(ctx)()
	if a.Jobs == nil {
		return JobOutcome{}, errors.New("activities: no job control configured")
	}
	return a.Jobs.WaitJob(ctx, in.WorkflowID)
}

// StopScheduledJobInput names the job to stop and says why.
type StopScheduledJobInput struct {
	WorkflowID string `json:"workflowId"`
	Reason     string `json:"reason,omitempty"`
}

// StopScheduledJob stops a job and returns once it is terminal.
func (a *ScheduleActivities) StopScheduledJob(ctx context.Context, in StopScheduledJobInput) error {
	defer keepAlive(ctx)()
	if a.Jobs == nil {
		return errors.New("activities: no job control configured")
	}
	return a.Jobs.StopJob(ctx, in.WorkflowID, in.Reason)
}
