package server

//go:generate go run ./internal/gen -out ../../docs/openapi.json

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/jsonschemamap"
)

// OpenAPIFile is where `go generate ./api/...` writes the document, relative to the
// repository root.
const OpenAPIFile = "docs/openapi.json"

var pathParamRE = regexp.MustCompile(`\{([^}]+)\}`)

// pathParams returns the names of a route path's parameters, in order.
func pathParams(path string) []string {
	var out []string
	for _, m := range pathParamRE.FindAllStringSubmatch(path, -1) {
		out = append(out, strings.TrimSuffix(m[1], "..."))
	}
	return out
}

var paramDocs = map[string]string{
	"ws":    "the workspace",
	"name":  "the object's name",
	"trial": "the trial's ID (trials are numbered from 0 in the order they were suggested)",
}

// servedOpenAPI is the document GET /v1/openapi.json answers, generated once (set in
// init: the route table that generates it holds the route that serves it).
var servedOpenAPI func() ([]byte, error)

func init() { servedOpenAPI = sync.OnceValues(OpenAPI) }

// openAPI answers the OpenAPI document: the bytes of docs/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	doc, err := servedOpenAPI()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
	return nil
}

// OpenAPI returns the OpenAPI 3.1 document of the API, generated from the route table
// (every route, whatever a particular server enables).
func OpenAPI() ([]byte, error) {
	g := &schemaGen{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	tags := []string{}
	for i := range routes {
		rt := &routes[i]
		op := map[string]any{"operationId": rt.id, "summary": rt.summary, "tags": []string{rt.tag}}
		if !slices.Contains(tags, rt.tag) {
			tags = append(tags, rt.tag)
		}
		var params []any
		for _, p := range pathParams(rt.path) {
			params = append(params, map[string]any{"name": p, "in": "path", "required": true,
				"description": paramDocs[p], "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.query {
			schema := map[string]any{"type": q.typ}
			if q.repeat {
				schema = map[string]any{"type": "array", "items": schema}
			}
			params = append(params, map[string]any{"name": q.name, "in": "query", "required": false,
				"description": q.desc, "schema": schema})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.request != nil {
			content, err := g.content(rt.request)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", rt.pattern(), err)
			}
			op["requestBody"] = map[string]any{"required": !rt.request.optional, "content": content}
		}
		responses := map[string]any{}
		for _, rep := range rt.responses {
			r := map[string]any{"description": rep.desc}
			if rep.body != nil {
				content, err := g.content(rep.body)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", rt.pattern(), err)
				}
				r["content"] = content
			}
			responses[strconv.Itoa(rep.status)] = r
		}
		errRef := func(name string) map[string]any { return map[string]any{"$ref": "#/components/responses/" + name} }
		// Every status the router and errorReply may answer the route with is listed,
		// so that a client generated from the document knows each.
		if rt.request != nil || len(rt.query) > 0 || len(pathParams(rt.path)) > 0 || rt.mutating() {
			responses["400"] = errRef("BadRequest")
		}
		if rt.request != nil {
			responses["413"] = errRef("TooLarge")
		}
		if rt.request != nil || rt.mutating() {
			responses["422"] = errRef("Invalid")
		}
		if rt.mutating() {
			responses["409"] = errRef("Conflict")
		}
		if rt.public {
			op["security"] = []any{}
		} else {
			responses["401"] = errRef("Unauthenticated")
			responses["429"] = errRef("TooManyRequests")
			responses["403"] = errRef("PermissionDenied")
			if len(pathParams(rt.path)) > 0 || rt.mutating() {
				responses["404"] = errRef("NotFound")
			}
			responses["500"] = errRef("Internal")
			responses["503"] = errRef("Unavailable")
		}
		responses["default"] = errRef("Error")
		op["responses"] = responses
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	errSchema, err := g.ref(api.ErrorBody{}, false)
	if err != nil {
		return nil, err
	}
	errResponse := func(desc string) map[string]any {
		return map[string]any{"description": desc,
			"content": map[string]any{"application/json": map[string]any{"schema": errSchema}}}
	}
	var tagList []any
	for _, t := range tags {
		tagList = append(tagList, map[string]any{"name": t})
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "OpenDLC API",
			"version": "v1",
			"description": "OpenDLC's JSON-over-HTTP API. Every route but /healthz and /v1/openapi.json needs a bearer token " +
				"(Authorization: Bearer dlc_...); see docs/api.md and docs/security.md. " +
				"Generated from api/server/routes.go by `go generate ./api/...`; do not edit.",
		},
		"servers":  []any{map[string]any{"url": "http://127.0.0.1:8480"}},
		"security": []any{map[string]any{"bearerAuth": []any{}}},
		"tags":     tagList,
		"paths":    paths,
		"components": map[string]any{
			"schemas": g.defs,
			"securitySchemes": map[string]any{
				"bearerAuth": map[string]any{"type": "http", "scheme": "bearer",
					"description": "an OpenDLC token, dlc_<id>_<secret>"},
			},
			"responses": map[string]any{
				"BadRequest":       errResponse("InvalidArgument or InvalidSpec: the body or a parameter is malformed; details name the fields"),
				"TooLarge":         errResponse("RequestTooLarge: the body is over the limit (1 MiB for specs, 64 KiB for small requests)"),
				"Invalid":          errResponse("InvalidSpec or InvalidArgument: every problem, each with its field path"),
				"Unauthenticated":  errResponse("Unauthenticated: no token, or a malformed, unknown, revoked or expired one"),
				"TooManyRequests":  errResponse("TooManyRequests: too many failed authentications from this address; Retry-After says when to try again"),
				"PermissionDenied": errResponse("PermissionDenied: the token's role may not do this, or the document names another workspace"),
				"NotFound":         errResponse("NotFound: no such object, or one in another workspace than the token's"),
				"Conflict":         errResponse("AlreadyExists or FailedPrecondition: the object exists, or its state does not allow the call"),
				"Internal":         errResponse("Internal: the server failed"),
				"Unavailable":      errResponse("Unavailable: Temporal or another dependency is unavailable, or the server lacks the feature; try again"),
				"Error":            errResponse("any other error"),
			},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// schemaGen turns Go types into JSON Schemas under components/schemas.
type schemaGen struct {
	defs map[string]any
}

func (g *schemaGen) content(p *payload) (map[string]any, error) {
	var schema any
	if p.anyOf != nil {
		var alts []any
		for _, v := range p.anyOf {
			s, err := g.ref(v, p.redacted)
			if err != nil {
				return nil, err
			}
			alts = append(alts, s)
		}
		// anyOf, not oneOf: a body is taken for what its kind says, and two kinds'
		// schemas may both accept a document.
		schema = map[string]any{"anyOf": alts}
	} else {
		s, err := g.ref(p.v, p.redacted)
		if err != nil {
			return nil, err
		}
		schema = s
	}
	out := map[string]any{}
	for _, m := range p.media {
		out[m] = map[string]any{"schema": schema}
	}
	return out, nil
}

// redactedTypes are the types an answer with redacted secrets (rules.go) holds them
// in: their redacted form is a definition of its own, named with the suffix Redacted.
var redactedTypes = map[reflect.Type]bool{
	reflect.TypeFor[schemas.NotificationRule]():     true,
	reflect.TypeFor[schemas.NotificationRuleSpec](): true,
	reflect.TypeFor[schemas.WebhookTarget]():        true,
	reflect.TypeFor[api.RuleList]():                 true,
	reflect.TypeFor[schemas.Trigger]():              true,
	reflect.TypeFor[schemas.TriggerSpec]():          true,
	reflect.TypeFor[schemas.TriggerWebhook]():       true,
	reflect.TypeFor[api.TriggerList]():              true,
}

// redactDefs lets the redacted definitions hold the redacted value where a secret was.
func redactDefs(defs map[string]any) {
	for _, def := range []string{"WebhookTargetRedacted", "TriggerWebhookRedacted"} {
		wh, _ := defs[def].(map[string]any)
		props, _ := wh["properties"].(map[string]any)
		for _, name := range []string{"secret", "botSecret"} {
			secret, ok := props[name]
			if !ok {
				continue
			}
			props[name] = map[string]any{
				"description": "the secret, or " + redacted + " in an answer",
				"anyOf":       []any{secret, map[string]any{"type": "string", "enum": []any{redacted}}},
			}
		}
	}
}

// ref reflects v's type and returns a schema that refers to it; with redacted, the
// schema of an answer whose secrets are redacted.
func (g *schemaGen) ref(v any, redacted bool) (any, error) {
	const refPrefix = "#/components/schemas/"
	r := &jsonschema.Reflector{Mapper: jsonschemamap.Mapper(refPrefix)}
	if redacted {
		r.Namer = func(t reflect.Type) string {
			if redactedTypes[t] {
				return t.Name() + "Redacted"
			}
			return ""
		}
	}
	s := r.Reflect(v)
	jsonschemamap.OptionalZero(reflect.TypeOf(v), s, r.Namer)
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	data = bytes.ReplaceAll(data, []byte(`"#/$defs/`), []byte(`"`+refPrefix))
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	defs, _ := root["$defs"].(map[string]any)
	if defs == nil {
		defs = map[string]any{}
	}
	shared, err := json.Marshal(jsonschemamap.Definitions())
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(shared, &defs); err != nil {
		return nil, err
	}
	if redacted {
		redactDefs(defs)
	}
	for name, d := range defs {
		if old, ok := g.defs[name]; ok && !reflect.DeepEqual(old, d) {
			return nil, fmt.Errorf("openapi: two different types are named %s", name)
		}
		g.defs[name] = d
	}
	delete(root, "$defs")
	delete(root, "$schema")
	delete(root, "$id")
	return root, nil
}
