package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Sentinel errors returned (wrapped) by Decode for problems that have no field path.
// Problems with a field path are returned as an ErrorList.
var (
	// ErrDocumentTooLarge: the document is larger than MaxDocumentSize.
	ErrDocumentTooLarge = errors.New("schemas: document too large")
	// ErrInvalidDocument: the document is not one well-formed YAML or JSON object.
	ErrInvalidDocument = errors.New("schemas: invalid document")
)

// Path is a field path such as "spec.roles.worker.replicas" or "spec.data[0].uri", built
// with NewPath, Child, Index and Key. The zero Path is the document root.
type Path string

// NewPath returns the path of a top-level field and, optionally, fields below it:
// NewPath("spec", "checkpoint", "uri").
func NewPath(name string, more ...string) Path {
	return Path("").Child(name, more...)
}

// Child returns the path of a struct field (or fields) below p.
func (p Path) Child(name string, more ...string) Path {
	s := string(p)
	for _, n := range append([]string{name}, more...) {
		if s != "" {
			s += "."
		}
		s += n
	}
	return Path(s)
}

// Index returns the path of the i-th element of the list at p: "spec.data[2]".
func (p Path) Index(i int) Path {
	return Path(string(p) + "[" + strconv.Itoa(i) + "]")
}

// simpleKey matches map keys written as a path segment; other keys are quoted in brackets
// so that a key with dots ("app.kubernetes.io/name") cannot be mistaken for nesting.
var simpleKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Key returns the path of the map entry k of the map at p: "spec.roles.worker", or
// `metadata.labels["app.kubernetes.io/name"]` when the key is not a plain word.
func (p Path) Key(k string) Path {
	if simpleKey.MatchString(k) {
		return p.Child(k)
	}
	return Path(string(p) + "[" + strconv.Quote(k) + "]")
}

// String returns the path as written in error messages.
func (p Path) String() string { return string(p) }

// FieldError is one problem with one field of a document. It is serialized to JSON as
// {"field": ..., "message": ...}, which is how the HTTP API returns it.
type FieldError struct {
	// Field is the path of the offending field, such as "spec.roles.worker.replicas";
	// empty for a problem with the whole document.
	Field string `json:"field"`
	// Detail says what is expected, such as "must be >= 1".
	Detail string `json:"message"`
}

// Error returns "field: detail".
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Detail
	}
	return e.Field + ": " + e.Detail
}

// Invalid returns a FieldError for path p whose detail is formatted from format and args.
func Invalid(p Path, format string, args ...any) *FieldError {
	return &FieldError{Field: p.String(), Detail: fmt.Sprintf(format, args...)}
}

// Required returns the FieldError for a missing required field.
func Required(p Path) *FieldError {
	return &FieldError{Field: p.String(), Detail: "required"}
}

// NotSupported returns the FieldError for a value outside an enumeration: "must be one
// of a, b, c".
func NotSupported[T ~string](p Path, supported []T) *FieldError {
	s := make([]string, len(supported))
	for i, v := range supported {
		s[i] = string(v)
	}
	return &FieldError{Field: p.String(), Detail: "must be one of " + strings.Join(s, ", ")}
}

// ErrorList is every problem found in a document. As an error it prints one problem per
// line; as JSON it is a list of FieldError objects. A nil or empty list means no problems;
// use Err to turn it into an error value.
type ErrorList []*FieldError

// Error returns the problems, one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns the list as an error, or nil when it is empty. Returning an empty ErrorList
// as an error directly would give a non-nil error.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Unwrap returns the individual problems, so that errors.As finds a *FieldError.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// MarshalJSON writes the list as a JSON array; an empty list is [] rather than null. It
// does not escape '<', '>' and '&' (as in "must be >= 1"); json.Marshal still will, an
// Encoder with SetEscapeHTML(false) will not.
func (l ErrorList) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("[]"), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode([]*FieldError(l)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Fields returns the field path of each problem, in order.
func (l ErrorList) Fields() []string {
	fields := make([]string, len(l))
	for i, e := range l {
		fields[i] = e.Field
	}
	return fields
}

// Sort orders the list by field path (list indexes compared as numbers), then by detail,
// so that output is stable.
func (l ErrorList) Sort() {
	slices.SortStableFunc(l, func(a, b *FieldError) int {
		if c := comparePaths(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
}

// comparePaths compares field paths naturally: runs of digits compare as numbers, so that
// spec.data[2] sorts before spec.data[10].
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			da, db := digitRun(a), digitRun(b)
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := len(na) - len(nb); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digitRun(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}
