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
// empty body leaves v as it is. On failure it has answered 400 (413 when too large),
// naming the field at fault.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64, allowEmpty bool) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		bodyReadError(w, err, limit)
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if allowEmpty {
			return true
		}
		writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "the request body is empty",
			Details: []schemas.FieldError{{Field: bodyField, Detail: "required: a JSON object"}}})
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON object")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid request body",
			Details: []schemas.FieldError{jsonFieldError(err)}})
		return false
	}
	return true
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

// bodyReadError answers a failure to read a body: 413 when it is larger than limit.
func bodyReadError(w http.ResponseWriter, err error, limit int64) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, api.Error{Code: api.CodeTooLarge,
			Message: fmt.Sprintf("request body is larger than %d bytes", limit),
			Details: []schemas.FieldError{{Field: bodyField, Detail: fmt.Sprintf("must be at most %d bytes", limit)}}})
		return
	}
	writeError(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "cannot read the request body",
		Details: []schemas.FieldError{{Field: bodyField, Detail: err.Error()}}})
}
