package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.temporal.io/api/serviceerror"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// httpError is an answer the HTTP layer itself decides: a body too large or
// malformed, a refused authorization, a bad query parameter.
type httpError struct {
	status int
	body   api.Error
}

func (e *httpError) Error() string { return e.body.Message }

func badRequest(message, field, detail string) error {
	return &httpError{http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: message,
		Details: []schemas.FieldError{{Field: field, Detail: detail}}}}
}

func unavailable(message string) error {
	return &httpError{http.StatusServiceUnavailable, api.Error{Code: api.CodeUnavailable, Message: message}}
}

func notFound(message string) error {
	return &httpError{http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: message}}
}

// specError is the answer to a document that does not decode or validate: 422 with
// every field at fault, or 400 for a problem with the document as a whole (not YAML or
// JSON, empty, too large).
func specError(err error) error {
	if list, ok := errors.AsType[schemas.ErrorList](err); ok {
		return &httpError{http.StatusUnprocessableEntity, api.Error{Code: api.CodeInvalidSpec,
			Message: fmt.Sprintf("the spec has %d problem(s)", len(list)), Details: fieldErrors(list)}}
	}
	return &httpError{http.StatusBadRequest, api.Error{Code: api.CodeInvalidSpec, Message: err.Error(),
		Details: []schemas.FieldError{{Field: bodyField, Detail: err.Error()}}}}
}

// serviceStatus maps the service's kinds of error to HTTP.
var serviceStatus = []struct {
	kind   error
	status int
	code   string
}{
	{service.ErrNotFound, http.StatusNotFound, api.CodeNotFound},
	{service.ErrAlreadyExists, http.StatusConflict, api.CodeAlreadyExists},
	{service.ErrInvalid, http.StatusBadRequest, api.CodeInvalidArgument},
	{service.ErrInvalidObject, http.StatusUnprocessableEntity, api.CodeInvalidArgument},
	{service.ErrConflict, http.StatusConflict, api.CodeFailedPrecondition},
	{service.ErrPermissionDenied, http.StatusForbidden, api.CodePermissionDenied},
}

// errorReply is the one mapping from an error a handler (or the router) returns to
// the HTTP status and the JSON error body. Anything it does not know is an internal
// error: 503 when Temporal is unavailable, the call timed out or Temporal gave up on
// it (a workflow query it cancelled while the worker restarts), 500 otherwise.
func errorReply(err error) (int, api.Error) {
	if he, ok := errors.AsType[*httpError](err); ok {
		return he.status, he.body
	}
	if se, ok := errors.AsType[*service.Error](err); ok {
		for _, m := range serviceStatus {
			if errors.Is(se.Kind, m.kind) {
				return m.status, api.Error{Code: m.code, Message: se.Message, Details: se.Fields}
			}
		}
	}
	if _, ok := errors.AsType[schemas.ErrorList](err); ok {
		return specReply(err)
	}
	if transient(err) {
		return http.StatusServiceUnavailable, api.Error{Code: api.CodeUnavailable, Message: err.Error()}
	}
	return http.StatusInternalServerError, api.Error{Code: api.CodeInternal, Message: err.Error()}
}

// transient reports whether err says the call may succeed if asked again: Temporal
// is unavailable, or the call ran out of time or was cancelled on Temporal's side.
// (A cancelled request of the client's own gets no answer, so a cancellation seen
// here is Temporal's.)
func transient(err error) bool {
	_, unavail := errors.AsType[*serviceerror.Unavailable](err)
	_, canceled := errors.AsType[*serviceerror.Canceled](err)
	_, deadline := errors.AsType[*serviceerror.DeadlineExceeded](err)
	return unavail || canceled || deadline || errors.Is(err, context.DeadlineExceeded)
}

func specReply(err error) (int, api.Error) {
	var he *httpError
	if !errors.As(specError(err), &he) {
		return http.StatusInternalServerError, api.Error{Code: api.CodeInternal, Message: err.Error()}
	}
	return he.status, he.body
}

// internal reports whether errorReply treats err as an internal failure (it is then
// logged).
func internal(status int) bool { return status >= 500 }

// writeErr answers err as errorReply maps it, logging internal failures.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	status, body := errorReply(err)
	var he *httpError
	if internal(status) && !errors.As(err, &he) {
		s.opts.Logger.Error(body.Message, "route", r.Pattern, "error", err)
	}
	writeError(w, status, body)
}
