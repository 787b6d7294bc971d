package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// rootMessage is the innermost error's message, without Temporal's wrapping.
func rootMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
