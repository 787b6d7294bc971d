package service

import (
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"

	"github.com/opendlc/opendlc/schemas"
)

// The kinds of failure a service reports. Every error a service method returns either
// wraps one of these (through *Error) or is an internal failure of what it calls.
// Front ends map them to their own answers (api/server: one table of HTTP statuses).
var (
	// ErrNotFound: the object does not exist (or is hidden from the caller).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: an object of that kind and name exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalid: the request's arguments are wrong; Error.Fields say which.
	ErrInvalid = errors.New("invalid argument")
	// ErrInvalidObject: the object to create (a token, a workspace) does not validate;
	// Error.Fields say which fields are at fault.
	ErrInvalidObject = errors.New("invalid object")
	// ErrConflict: the request does not fit the object's state (an ended experiment
	// cannot be resumed).
	ErrConflict = errors.New("conflict")
	// ErrPermissionDenied: the caller may not do this to that object (a workspace admin
	// creating a token of another workspace); Error.Fields say which field is refused.
	ErrPermissionDenied = errors.New("permission denied")
)

// Error is a service failure of one of the kinds above, with the message a user reads
// and, for ErrInvalid, the fields at fault.
type Error struct {
	Kind    error
	Message string
	Fields  []schemas.FieldError
}

func (e *Error) Error() string { return e.Message }

// Unwrap makes errors.Is(err, ErrNotFound) and the others work.
func (e *Error) Unwrap() error { return e.Kind }

func notFound(object, ws, name string) error {
	return &Error{Kind: ErrNotFound, Message: fmt.Sprintf("%s %s not found in workspace %s", object, name, ws)}
}

func invalid(message, field, detail string) error {
	return &Error{Kind: ErrInvalid, Message: message, Fields: []schemas.FieldError{{Field: field, Detail: detail}}}
}

// isNotFound reports whether Temporal answered that an execution does not exist.
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// isAlreadyStarted reports whether Temporal refused a start because the id is taken.
func isAlreadyStarted(err error) bool {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &started)
}
