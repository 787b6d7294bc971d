package activities

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// Error types carried by non-retryable application errors. Workflows branch on them with
// errors.As(err, &appErr) and appErr.Type().
const (
	// ErrTypeInvalidSpec: the job cannot be run as written; retrying will not help.
	ErrTypeInvalidSpec = "InvalidSpec"
	// ErrTypeGangLost: the backend no longer knows the gang (its state was lost).
	ErrTypeGangLost = "GangLost"
)

// invalidSpec wraps err as a non-retryable InvalidSpec error.
func invalidSpec(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidSpec, err)
}

// ErrorType returns the application error type of err, or "" for other errors.
func ErrorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}
