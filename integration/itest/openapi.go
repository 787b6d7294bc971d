package itest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The API's integration tests check the server against its OpenAPI document
// (docs/openapi.json, issue 37): the SDK clients Client makes (the shared client of
// package integration among them) send through a validating transport, and Main fails
// the package when any request or answer broke the document. A third-party validator judges: kin-openapi's
// openapi3filter.

// ndjsonMedia is the media type of streamed answers, validated line by line.
const ndjsonMedia = "application/x-ndjson"

// OpenAPIValidator validates the API's requests and answers against its document and
// keeps what broke it.
type OpenAPIValidator struct {
	doc    *openapi3.T
	raw    any // the document as read, for lineSchema
	router routers.Router

	mu       sync.Mutex
	problems []string
	calls    map[string]int
	lines    map[string]*jsonschema.Schema // by lineSchema's JSON pointer
}

// NewOpenAPIValidator loads the OpenAPI document at path.
func NewOpenAPIValidator(path string) (*OpenAPIValidator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The document names the default address; the tests' stacks listen elsewhere.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &OpenAPIValidator{doc: doc, raw: raw, router: router, calls: map[string]int{}, lines: map[string]*jsonschema.Schema{}}, nil
}

// Problems are what broke the document so far, each naming the operation.
func (v *OpenAPIValidator) Problems() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.problems)
}

// Calls counts the validated calls by operation.
func (v *OpenAPIValidator) Calls() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.calls)
}

func (v *OpenAPIValidator) problem(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.problems) < 200 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
}

func (v *OpenAPIValidator) count(op string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls[op]++
}

func (v *OpenAPIValidator) options() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		MultiError:              true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020()},
	}
}

// Transport wraps inner: each request to a path of the document and its answer are
// validated. It changes nothing of either; what breaks the document is kept
// (Problems). A request the document refuses may be refused by the server (4xx: the
// test sent it on purpose), not accepted.
func (v *OpenAPIValidator) Transport(inner http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		route, params, err := v.router.FindRoute(req)
		if err != nil {
			// Not a call of the API (S3, a webhook receiver, an unknown path).
			return inner.RoundTrip(req)
		}
		op := route.Operation.OperationID
		var reqBody []byte
		if req.Body != nil && req.Body != http.NoBody {
			reqBody, err = io.ReadAll(req.Body)
			_ = req.Body.Close()
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(reqBody))
		}
		resp, rerr := inner.RoundTrip(req)
		if rerr != nil {
			return resp, rerr
		}
		v.count(op)
		// Validate a copy of the request: the validator reads its body.
		vreq := req.Clone(context.Background())
		vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
		in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: v.options()}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && resp.StatusCode < 400 {
			v.problem("%s (%s %s): the server answered %d to a request the document refuses: %v",
				op, req.Method, req.URL.Path, resp.StatusCode, compact(err))
		}
		if route.Operation.Responses.Value(strconv.Itoa(resp.StatusCode)) == nil {
			v.problem("%s (%s %s): status %d is not listed", op, req.Method, req.URL.Path, resp.StatusCode)
		}
		media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
			Header: resp.Header, Options: v.options()}
		if media == ndjsonMedia {
			out.Options.ExcludeResponseBody = true
			out.Body = io.NopCloser(http.NoBody)
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				v.problem("%s (%s %s): answer %d: %v", op, req.Method, req.URL.Path, resp.StatusCode, compact(err))
			}
			schema, err := v.lineSchema(route, resp.StatusCode)
			if err != nil {
				v.problem("%s (%s %s): the schema of a streamed line: %v", op, req.Method, req.URL.Path, err)
			}
			if schema != nil {
				resp.Body = &lineValidator{ReadCloser: resp.Body, check: func(line []byte) {
					item, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
					if err != nil {
						v.problem("%s (%s %s): streamed line %q is not JSON: %v", op, req.Method, req.URL.Path, line, err)
						return
					}
					if err := schema.Validate(item); err != nil {
						v.problem("%s (%s %s): streamed line %s: %v", op, req.Method, req.URL.Path, short(line), compact(err))
					}
				}}
			}
			return resp, nil
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			v.problem("%s (%s %s): reading the answer: %v", op, req.Method, req.URL.Path, err)
			return resp, nil
		}
		out.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			v.problem("%s (%s %s): answer %d %s: %v", op, req.Method, req.URL.Path, resp.StatusCode, short(body), compact(err))
		}
		return resp, nil
	})
}

// lineSchema is the schema of one line of a streamed answer (nil: the document gives
// none), compiled once per operation and status from the document itself with
// santhosh-tekuri/jsonschema, the library kin-openapi validates JSON Schema 2020 with.
// Not kin-openapi's Schema.VisitJSON: it compiles the schema again on every call, about
// 0.4 ms of CPU a line (reading back a 100,000-line log spent 38 s in it).
func (v *OpenAPIValidator) lineSchema(route *routers.Route, status int) (*jsonschema.Schema, error) {
	r := route.Operation.Responses.Value(strconv.Itoa(status))
	if r == nil || r.Value == nil {
		return nil, nil
	}
	if mt := r.Value.Content.Get(ndjsonMedia); mt == nil || mt.Schema == nil {
		return nil, nil
	}
	ptr := "/paths/" + pointerToken(route.Path) + "/" + strings.ToLower(route.Method) +
		"/responses/" + strconv.Itoa(status) + "/content/" + pointerToken(ndjsonMedia) + "/schema"
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.lines[ptr]; ok {
		return s, nil
	}
	const docURL = "file:///openapi.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // date-time and the other formats, as kin-openapi checks them
	if err := c.AddResource(docURL, v.raw); err != nil {
		return nil, err
	}
	s, err := c.Compile(docURL + "#" + ptr)
	if err != nil {
		return nil, err
	}
	v.lines[ptr] = s
	return s, nil
}

// pointerToken escapes s as one token of a JSON pointer (RFC 6901).
func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// lineValidator checks each complete line of a stream as it is read.
type lineValidator struct {
	io.ReadCloser
	check func([]byte)
	buf   []byte
}

func (l *lineValidator) Read(p []byte) (int, error) {
	n, err := l.ReadCloser.Read(p)
	l.buf = append(l.buf, p[:n]...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(l.buf[:i]); len(line) > 0 {
			l.check(line)
		}
		l.buf = l.buf[i+1:]
	}
	return n, err
}

// compact is an error of the validator without the schemas and values it dumps.
func compact(err error) string {
	var keep []string
	for line := range strings.SplitSeq(err.Error(), "\n") {
		switch {
		case line == "" || line == "Schema:" || line == "Value:":
		case strings.HasPrefix(line, " "), strings.HasPrefix(line, "\t"):
		default:
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, " | ")
}

func short(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// openAPIValidator validates the calls of this process's SDK clients made by Client
// (loaded once, by Main or the first Client).
var openAPIValidator = sync.OnceValues(func() (*OpenAPIValidator, error) {
	return NewOpenAPIValidator(filepath.Join(Root(), "docs", "openapi.json"))
})

// validatingHTTPClient is the HTTP client of Client's SDK clients: every call is
// validated against the document.
func validatingHTTPClient() (*http.Client, error) {
	v, err := openAPIValidator()
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: v.Transport(http.DefaultTransport)}, nil
}

// validateOpenAPI loads the document (Main); the returned function reports what the
// calls of Client's clients broke of it, as an error naming each operation.
func validateOpenAPI() (report func() error, err error) {
	v, err := openAPIValidator()
	if err != nil {
		return nil, err
	}
	return func() error {
		calls := v.Calls()
		n := 0
		for _, c := range calls {
			n += c
		}
		fmt.Fprintf(os.Stderr, "openapi: %d calls of %d operations validated against docs/openapi.json\n", n, len(calls))
		problems := v.Problems()
		if len(problems) == 0 {
			return nil
		}
		return errors.New("calls that break docs/openapi.json (issue 37):\n  " + strings.Join(problems, "\n  "))
	}, nil
}

// OpenAPIProblems are what the calls of Client's clients broke of the document so far.
func OpenAPIProblems() []string {
	v, err := openAPIValidator()
	if err != nil {
		return []string{err.Error()}
	}
	return v.Problems()
}
