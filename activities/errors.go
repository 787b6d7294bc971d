package activities

import (
	"errors"
	"fmt"

	"github.com/opendlc/opendlc/backend"

	"go.temporal.io/sdk/temporal"
)

// Error types carried by non-retryable application errors. Workflows branch on them with
// errors.As(err, &appErr) and appErr.Type().
const (
	// ErrTypeInvalidSpec: the job cannot be run as written; retrying will not help.
	ErrTypeInvalidSpec = "InvalidSpec"
	// ErrTypeGangLost: the backend no longer knows the gang (its state was lost).
	ErrTypeGangLost = "GangLost"
	// ErrTypeInsufficientResources: the gang does not fit in what is free now
	// (backend.ErrInsufficientResources); nothing was started. The job waits Queued and
	// launches again.
	ErrTypeInsufficientResources = "InsufficientResources"
	// ErrTypeUnschedulable: the gang can never fit the nodes it may use, even empty
	// (backend.ErrUnschedulable); nothing was started. The job waits Queued with a
	// condition saying what is short, and launches again with a longer backoff.
	ErrTypeUnschedulable = "Unschedulable"
)

// invalidSpec wraps err as a non-retryable InvalidSpec error.
func invalidSpec(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidSpec, err)
}

// ErrorType returns the application error type of err, or "" for other errors.
func ErrorType(err error) string {
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return appErr.Type()
	}
	return ""
}

// backendError turns a backend's error into the activity's: a spec problem
// (backend.ErrInvalidSpec) becomes a non-retryable InvalidSpec error, a gang that does
// not fit yet (backend.ErrInsufficientResources) a non-retryable InsufficientResources
// error, one that can never fit (backend.ErrUnschedulable) a non-retryable
// Unschedulable error (the workflow, not the activity, waits and retries: it shows the job Queued
// meanwhile), anything else is wrapped with what was being done and left retryable. A
// nil err stays nil.
func backendError(err error, doing string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, backend.ErrInvalidSpec):
		return invalidSpec(err)
	case errors.Is(err, backend.ErrInsufficientResources):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInsufficientResources, err)
	case errors.Is(err, backend.ErrUnschedulable):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeUnschedulable, err)
	default:
		return fmt.Errorf("%s: %w", doing, err)
	}
}
