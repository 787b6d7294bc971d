package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/opendlc/opendlc/api"
)

// FuzzSubmitHandler sends arbitrary bodies to POST /v1/jobs through the whole handler
// (authentication, body limit, decoding, validation, authorization) as a member of
// workspace "default". Whatever the body: the answer is 201 or a 4xx in the API's error
// shape, with field paths for 400, 413 and 422; a workflow starts exactly when the
// answer is 201, and then for a spec that validates.
func FuzzSubmitHandler(f *testing.F) {
	for _, name := range []string{"valid.yaml", "minimal.json", "five-mistakes.yaml", "notificationrule-valid.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "schemas", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(jobSpec("default"))
	f.Add(jobSpec("other"))
	f.Add([]byte(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":"a"},"spec":{"framework":"custom","command":["x"],"roles":{"w":{"replicas":1}}}}`))
	f.Add([]byte("kind: TrainingJob\nspec: {roles: {w: {replicas: \"x\"}}}\nbogus: 1\n"))
	f.Add([]byte("{"))
	f.Add([]byte(""))
	f.Add([]byte("a: &a [*a]"))

	tc := &fakeTemporal{}
	authn := fakeAuth{}
	member := authn.token(f, "fuzz", "default", api.RoleMember)
	s := testServer(tc, authn, WithMaxBodySize(64<<10))
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		before := tc.starts()
		rec := call(h, http.MethodPost, "/v1/jobs", member, body)
		started := tc.starts() - before
		switch rec.Code {
		case http.StatusCreated:
			if started != 1 {
				t.Fatalf("201 with %d workflow starts", started)
			}
			var j api.Job
			if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
				t.Fatalf("201 body: %v", err)
			}
			if errs := j.Spec.Validate(); len(errs) > 0 {
				t.Fatalf("started a job whose spec does not validate: %v", errs)
			}
			if j.Spec.Metadata.Workspace != "default" {
				t.Fatalf("started a job in workspace %q", j.Spec.Metadata.Workspace)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity, http.StatusForbidden:
			if started != 0 {
				t.Fatalf("%d with %d workflow starts", rec.Code, started)
			}
			var eb api.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("%d body %q is not the error shape (%v)", rec.Code, rec.Body, err)
			}
			if rec.Code != http.StatusForbidden && len(eb.Error.Details) == 0 {
				t.Fatalf("%d without field details: %s", rec.Code, rec.Body)
			}
			for _, d := range eb.Error.Details {
				if d.Detail == "" {
					t.Fatalf("a detail without a message: %s", rec.Body)
				}
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("content type %q", rec.Header().Get("Content-Type"))
		}
	})
}
