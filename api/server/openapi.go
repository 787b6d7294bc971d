package server

//go:generate go run ./internal/gen -out ../../docs/openapi.json

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/opendlc/opendlc/api"
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
	"ws":   "the workspace",
	"name": "the object's name",
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
		if rt.request != nil || len(rt.query) > 0 {
			responses["400"] = errRef("BadRequest")
		}
		if rt.request != nil {
			responses["413"] = errRef("TooLarge")
			responses["422"] = errRef("Invalid")
		}
		if rt.public {
			op["security"] = []any{}
		} else {
			responses["401"] = errRef("Unauthenticated")
			responses["429"] = errRef("TooManyRequests")
			responses["403"] = errRef("PermissionDenied")
			if len(pathParams(rt.path)) > 0 {
				responses["404"] = errRef("NotFound")
			}
		}
		responses["default"] = errRef("Error")
		op["responses"] = responses
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	errSchema, err := g.ref(api.ErrorBody{})
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
			"description": "OpenDLC's JSON-over-HTTP API. Every route but /healthz needs a bearer token " +
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
				"Error":            errResponse("any other error: AlreadyExists (409), Unavailable (503), Internal (500)"),
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
	if p.oneOf != nil {
		var alts []any
		for _, v := range p.oneOf {
			s, err := g.ref(v)
			if err != nil {
				return nil, err
			}
			alts = append(alts, s)
		}
		schema = map[string]any{"oneOf": alts}
	} else {
		s, err := g.ref(p.v)
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

// ref reflects v's type and returns a schema that refers to it.
func (g *schemaGen) ref(v any) (any, error) {
	r := &jsonschema.Reflector{}
	s := r.Reflect(v)
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	data = bytes.ReplaceAll(data, []byte(`"#/$defs/`), []byte(`"#/components/schemas/`))
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	defs, _ := root["$defs"].(map[string]any)
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
