package server

import (
	"net/http"
	"testing"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/service"
)

// A workflow the API starts is listed under the token's name (DlcOwner, issue 37).
func TestSubmitSetsOwner(t *testing.T) {
	tc := &fakeTemporal{}
	authn := fakeAuth{}
	member := authn.token(t, "alpha-member", "alpha", api.RoleMember)
	h := testServer(tc, authn).Handler()
	rec := call(h, "POST", "/v1/jobs", member, jobSpec("alpha"))
	if rec.Code != http.StatusCreated || tc.starts() != 1 {
		t.Fatalf("submit: %d %s; %d starts", rec.Code, rec.Body, tc.starts())
	}
	owner, ok := tc.last.TypedSearchAttributes.GetKeyword(service.OwnerKey)
	if !ok || owner != "alpha-member" {
		t.Errorf("DlcOwner %q (set %v), want alpha-member", owner, ok)
	}
}
