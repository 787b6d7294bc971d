package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/service"
)

func checkedInOpenAPI(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(OpenAPIFile)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The checked-in document is what the route table generates.
func TestOpenAPIUpToDate(t *testing.T) {
	want, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(checkedInOpenAPI(t), want) {
		t.Errorf("%s is stale: run go generate ./api/...", OpenAPIFile)
	}
}

// Every route a server serves (all options on) is in the document, and every operation
// of the document is served.
func TestOpenAPIMatchesServedRoutes(t *testing.T) {
	s := New(service.Compose(t.Context(), service.Config{Rules: &notify.Store{}, Redriver: &notify.Redriver{}, Auth: &auth.Store{}}), nil, WithAuth(&auth.Store{}))
	s.Handler()
	var served []string
	for _, p := range s.served.patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			t.Errorf("route %q has no method", p)
			continue
		}
		served = append(served, method+" "+path)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(checkedInOpenAPI(t), &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if httpMethods[method] {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if diff := cmp.Diff(documented, served); diff != "" {
		t.Errorf("served routes differ from the OpenAPI paths (-documented +served):\n%s", diff)
	}
}

// The document is a valid OpenAPI 3 document (structurally).
func TestOpenAPIValid(t *testing.T) {
	var doc any
	if err := json.Unmarshal(checkedInOpenAPI(t), &doc); err != nil {
		t.Fatal(err)
	}
	if problems := validateOpenAPI(doc); len(problems) > 0 {
		t.Errorf("%d problem(s):\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// The validator finds what it is there to find.
func TestOpenAPIValidatorCatches(t *testing.T) {
	tests := map[string]struct {
		doc  string
		want []string
	}{
		"valid": {doc: `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a/{x}":{"get":{"operationId":"a",
			"parameters":[{"name":"x","in":"path","required":true,"schema":{"type":"string"}}],
			"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/A"}}}}}}}},
			"components":{"schemas":{"A":{"type":"object"}}}}`},
		"everything wrong": {doc: `{"openapi":"2.0","info":{"title":""},"security":[{"nope":[]}],"paths":{"a":{"fetch":{}},
			"/b/{y}":{"get":{"operationId":"b","parameters":[{"name":"z","in":"path","required":false},{"name":"q","in":"body"}],
			"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Missing"}}}},"99":{}}}},
			"/c":{"post":{"operationId":"b","requestBody":{"content":{}},"responses":{}}}}}`,
			want: []string{
				`info.title: required`,
				`info.version: required`,
				`openapi: must be 3.x, not "2.0"`,
				`paths["/b/{y}"].get.parameters[0]: path parameter "z" must be required`,
				`paths["/b/{y}"].get.parameters[0]: path parameter "z" is not in the path`,
				`paths["/b/{y}"].get.parameters[0]: schema or content required`,
				`paths["/b/{y}"].get.parameters[1].in: must be query, header, path or cookie, not "body"`,
				`paths["/b/{y}"].get.parameters[1]: schema or content required`,
				`paths["/b/{y}"].get.responses["99"]: not a status code`,
				`paths["/b/{y}"].get.responses["99"].description: required`,
				`paths["/b/{y}"].get: path parameter "y" is not declared`,
				`paths["/b/{y}"].get.responses["200"].content["application/json"].schema.$ref: "#/components/schemas/Missing" does not resolve`,
				`paths["/c"].post.operationId: "b" is used twice`,
				`paths["/c"].post.requestBody.content: required`,
				`paths["/c"].post.responses: required`,
				`paths["a"]: must start with /`,
				`paths["a"].fetch: not an HTTP method`,
				`security[0]: "nope" is not in components.securitySchemes`,
			}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var doc any
			if err := json.Unmarshal([]byte(tt.doc), &doc); err != nil {
				t.Fatal(err)
			}
			got := validateOpenAPI(doc)
			sort.Strings(got)
			want := slices.Clone(tt.want)
			sort.Strings(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true,
	"options": true, "head": true, "patch": true, "trace": true}

var statusKeyRE = regexp.MustCompile(`^([1-5][0-9][0-9]|[1-5]XX|default)$`)

// validateOpenAPI checks the parts of the OpenAPI 3 specification a generator can get
// wrong: required fields, path templates against their parameters, parameter
// locations, response keys, unique operation ids, security scheme names, and that
// every $ref resolves within the document.
func validateOpenAPI(doc any) []string {
	var problems []string
	bad := func(path, format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return []string{"the document is not an object"}
	}
	if v, _ := root["openapi"].(string); !strings.HasPrefix(v, "3.") {
		bad("openapi", "must be 3.x, not %q", v)
	}
	info, _ := root["info"].(map[string]any)
	for _, f := range []string{"title", "version"} {
		if s, _ := info[f].(string); s == "" {
			bad("info."+f, "required")
		}
	}
	components, _ := root["components"].(map[string]any)
	schemes, _ := components["securitySchemes"].(map[string]any)
	checkSecurity := func(path string, v any) {
		list, _ := v.([]any)
		for i, req := range list {
			m, _ := req.(map[string]any)
			for name := range m {
				if _, ok := schemes[name]; !ok {
					bad(fmt.Sprintf("%s[%d]", path, i), "%q is not in components.securitySchemes", name)
				}
			}
		}
	}
	checkSecurity("security", root["security"])
	for name := range schemes {
		s, _ := schemes[name].(map[string]any)
		if t, _ := s["type"].(string); t == "" {
			bad("components.securitySchemes."+name+".type", "required")
		}
	}
	for name := range componentSchemas(components) {
		if !regexp.MustCompile(`^[a-zA-Z0-9._-]+$`).MatchString(name) {
			bad("components.schemas", "invalid name %q", name)
		}
	}

	paths, ok := root["paths"].(map[string]any)
	if !ok {
		bad("paths", "required")
	}
	opIDs := map[string]bool{}
	for _, p := range sortedKeys(paths) {
		pp := fmt.Sprintf("paths[%q]", p)
		if !strings.HasPrefix(p, "/") {
			bad(pp, "must start with /")
		}
		templ := pathParams(p)
		item, _ := paths[p].(map[string]any)
		for _, method := range sortedKeys(item) {
			if method == "parameters" || method == "summary" || method == "description" || method == "servers" {
				continue
			}
			op, _ := item[method].(map[string]any)
			opPath := pp + "." + method
			if !httpMethods[method] {
				bad(opPath, "not an HTTP method")
				continue
			}
			if id, _ := op["operationId"].(string); id != "" {
				if opIDs[id] {
					bad(opPath+".operationId", "%q is used twice", id)
				}
				opIDs[id] = true
			}
			declared := map[string]bool{}
			params, _ := op["parameters"].([]any)
			for i, raw := range params {
				prm, _ := raw.(map[string]any)
				ppath := fmt.Sprintf("%s.parameters[%d]", opPath, i)
				name, _ := prm["name"].(string)
				in, _ := prm["in"].(string)
				if name == "" {
					bad(ppath+".name", "required")
				}
				switch in {
				case "path":
					declared[name] = true
					if req, _ := prm["required"].(bool); !req {
						bad(ppath, "path parameter %q must be required", name)
					}
					if !slices.Contains(templ, name) {
						bad(ppath, "path parameter %q is not in the path", name)
					}
				case "query", "header", "cookie":
				default:
					bad(ppath+".in", "must be query, header, path or cookie, not %q", in)
				}
				if prm["schema"] == nil && prm["content"] == nil {
					bad(ppath, "schema or content required")
				}
			}
			for _, name := range templ {
				if !declared[name] {
					bad(opPath, "path parameter %q is not declared", name)
				}
			}
			if rb, ok := op["requestBody"].(map[string]any); ok {
				if c, _ := rb["content"].(map[string]any); len(c) == 0 {
					bad(opPath+".requestBody.content", "required")
				}
			}
			responses, _ := op["responses"].(map[string]any)
			if len(responses) == 0 {
				bad(opPath+".responses", "required")
			}
			for _, code := range sortedKeys(responses) {
				rpath := fmt.Sprintf("%s.responses[%q]", opPath, code)
				if !statusKeyRE.MatchString(code) {
					bad(rpath, "not a status code")
				}
				resp, _ := responses[code].(map[string]any)
				if _, isRef := resp["$ref"]; isRef {
					continue
				}
				if d, _ := resp["description"].(string); d == "" {
					bad(rpath+".description", "required")
				}
			}
			checkSecurity(opPath+".security", op["security"])
		}
	}
	walkRefs(root, "", func(at, ref string) {
		if !resolves(root, ref) {
			bad(at+".$ref", "%q does not resolve", ref)
		}
	})
	return problems
}

func componentSchemas(components map[string]any) map[string]any {
	s, _ := components["schemas"].(map[string]any)
	return s
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// walkRefs calls fn for every "$ref" in v, with the path where it is.
func walkRefs(v any, at string, fn func(at, ref string)) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			fn(at, ref)
		}
		for _, k := range sortedKeys(v) {
			if k == "$ref" {
				continue
			}
			next := fmt.Sprintf("%s[%q]", at, k)
			if identRE.MatchString(k) {
				next = at + "." + k
				if at == "" {
					next = k
				}
			}
			walkRefs(v[k], next, fn)
		}
	case []any:
		for i, e := range v {
			walkRefs(e, at+"["+strconv.Itoa(i)+"]", fn)
		}
	}
}

// resolves reports whether a local reference ("#/a/b") names a value of root.
func resolves(root any, ref string) bool {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return false
	}
	if ptr == "" {
		return true
	}
	cur := root
	for tok := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		tok, err := url.PathUnescape(tok)
		if err != nil {
			return false
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return false
			}
			cur = c[i]
		default:
			return false
		}
	}
	return true
}
