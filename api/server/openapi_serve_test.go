package server

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/opendlc/opendlc/api"
)

// GET /v1/openapi.json answers the checked-in document, without a token.
func TestOpenAPIServed(t *testing.T) {
	h := testServer(nil, fakeAuth{}).Handler()
	rec := call(h, "GET", "/v1/openapi.json", "", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if !bytes.Equal(rec.Body.Bytes(), checkedInOpenAPI(t)) {
		t.Errorf("the served document is not %s", OpenAPIFile)
	}
}

// A third-party loader (kin-openapi) loads and validates the document.
func TestOpenAPIKinValid(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(checkedInOpenAPI(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
}

// Statuses the document must list (issue 37: a client generated from it knows each).
func TestOpenAPIListsConflicts(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string                     `json:"operationId"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(checkedInOpenAPI(t), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"submitJob": {"201", "409"}, "createWorkspace": {"201", "409"}, "deleteWorkspace": {"204", "409"},
		"releaseNode": {"200", "409"}, "getJob": {"200", "404", "503"},
	}
	found := map[string]bool{}
	for _, ops := range doc.Paths {
		for _, op := range ops {
			statuses, ok := want[op.OperationID]
			if !ok {
				continue
			}
			found[op.OperationID] = true
			for _, st := range statuses {
				if _, ok := op.Responses[st]; !ok {
					t.Errorf("%s does not list %s", op.OperationID, st)
				}
			}
		}
	}
	for id := range want {
		if !found[id] {
			t.Errorf("no operation %s", id)
		}
	}
}

// The workspace creation body documented (api.WorkspaceRequest) is api.Workspace less
// what the server sets: a field added to one is added to the other.
func TestWorkspaceRequestMatchesWorkspace(t *testing.T) {
	fields := func(typ reflect.Type) map[string]reflect.Type {
		out := map[string]reflect.Type{}
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out[name] = f.Type
		}
		return out
	}
	want := fields(reflect.TypeFor[api.Workspace]())
	delete(want, "createdAt")
	delete(want, "createdBy")
	if got := fields(reflect.TypeFor[api.WorkspaceRequest]()); !maps.Equal(got, want) {
		t.Errorf("api.WorkspaceRequest's fields %v, api.Workspace's less createdAt and createdBy %v", got, want)
	}
}
