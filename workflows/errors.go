package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// rootMessage is the innermost error's message, without Temporal's wrapping.
func rootMessage(err error) string {
	if appErr, ok := errors.AsType[*temporal.ApplicationError](err); ok {
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
