package auth_test

import (
	"strings"
	"testing"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
)

// TestSingleTenantRefusesOtherWorkspaces: a single-tenant store (a stack whose local
// jobs run without the sandbox) gives tokens to admins and the default workspace, and
// refuses every role of another workspace, naming the field and why.
func TestSingleTenantRefusesOtherWorkspaces(t *testing.T) {
	s := newStore(t, auth.WithSingleTenant("local jobs run without the sandbox"))
	ctx := withVision(t, s)
	if _, err := s.CreateWorkspace(ctx, api.Workspace{Name: schemas.DefaultWorkspace}, "admin"); err != nil {
		t.Fatal(err)
	}
	for _, role := range []api.Role{api.RoleViewer, api.RoleMember, api.RoleWorkspaceAdmin} {
		_, err := s.CreateToken(ctx, api.TokenRequest{Name: "v-" + string(role), Workspace: "vision", Role: role}, "admin")
		if f := fieldsOf(err); len(f) != 1 || f[0] != "workspace" || !strings.Contains(err.Error(), "single-tenant: local jobs run without the sandbox") {
			t.Errorf("a %s token of vision: %v, want refused on workspace as single-tenant", role, err)
		}
	}
	for _, req := range []api.TokenRequest{
		{Name: "d-member", Workspace: schemas.DefaultWorkspace, Role: api.RoleMember},
		{Name: "root", Workspace: api.AllWorkspaces, Role: api.RoleAdmin},
	} {
		if _, err := s.CreateToken(ctx, req, "admin"); err != nil {
			t.Errorf("a %s token of %s: %v", req.Role, req.Workspace, err)
		}
	}
}
