package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// bodyField is the field path of a problem with the request body as a whole.
const bodyField = "body"

// decodeJSON reads a JSON body of at most limit bytes into v, strictly: unknown
// fields, values of the wrong type and trailing data are refused. With allowEmpty an
// empty body leaves v as it is. A failure is an error to answer: 400 (413 when too
// large), naming the field at fault.
func decodeJSON(r *http.Request, v any, limit int64, allowEmpty bool) error {
	data, err := io.ReadAll(http.MaxBytesReader(writerOf(r), r.Body, limit))
	if err != nil {
		return bodyReadError(err, limit)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if allowEmpty {
			return nil
		}
		return badRequest("the request body is empty", bodyField, "required: a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON object")
	}
	if err != nil {
		return &httpError{http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid request body",
			Details: []schemas.FieldError{jsonFieldError(err)}}}
	}
	return nil
}

// writerOf is the answer's writer of a routed request (nil outside the router), which
// http.MaxBytesReader tells to close the connection after a too large body.
func writerOf(r *http.Request) http.ResponseWriter {
	if st := requestOf(r); st != nil {
		return st.w
	}
	return nil
}

// jsonFieldError names the field of an encoding/json error where it can.
func jsonFieldError(err error) schemas.FieldError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return schemas.FieldError{Field: te.Field, Detail: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), te.Value)}
	case errors.As(err, &te):
		return schemas.FieldError{Field: bodyField, Detail: "must be a JSON object, not " + te.Value}
	case errors.As(err, &se):
		return schemas.FieldError{Field: bodyField, Detail: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return schemas.FieldError{Field: bodyField, Detail: "invalid JSON: unexpected end"}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return schemas.FieldError{Field: strings.Trim(f, `"`), Detail: "unknown field"}
	}
	return schemas.FieldError{Field: bodyField, Detail: strings.TrimPrefix(msg, "json: ")}
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Interface:
		return "a JSON value"
	}
	return "a number"
}

// bodyReadError is the answer to a failure to read a body: 413 when it is larger than
// limit.
func bodyReadError(err error, limit int64) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &httpError{http.StatusRequestEntityTooLarge, api.Error{Code: api.CodeTooLarge,
			Message: fmt.Sprintf("request body is larger than %d bytes", limit),
			Details: []schemas.FieldError{{Field: bodyField, Detail: fmt.Sprintf("must be at most %d bytes", limit)}}}}
	}
	return badRequest("cannot read the request body", bodyField, err.Error())
}
