package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// Every kind registers with the API (kinds.go): routes the table serves and a document
// route that takes the kind's document, which /v1/validate accepts too
// (TestValidateEveryKind has a document of every kind). No registration names a kind
// the schemas package does not know.
func TestEveryKindHasRoutes(t *testing.T) {
	registered := map[schemas.Kind]kindAPI{}
	for _, k := range apiKinds {
		if _, dup := registered[k.kind]; dup {
			t.Errorf("kind %s registers twice in apiKinds (api/server/kinds.go)", k.kind)
		}
		registered[k.kind] = k
		if !slices.Contains(schemas.Kinds(), k.kind) {
			t.Errorf("apiKinds registers kind %s, which is not in schemas.Kinds() (schemas/kinds.go)", k.kind)
		}
	}
	// Every feature on: the service serves rules and triggers.
	s := testServerWith(nil, fakeAuth{}, service.Config{Rules: &notify.Store{}, Redriver: &notify.Redriver{}, Triggers: discardTriggers{}, Templates: discardTemplates{}})
	served := s.tableMux().patterns
	for _, kind := range schemas.Kinds() {
		k, ok := registered[kind]
		if !ok {
			t.Errorf("kind %s has no routes: register a kindAPI for it in apiKinds (api/server/kinds.go)", kind)
			continue
		}
		if err := k.check(); err != nil {
			t.Errorf("%v (api/server/kinds.go)", err)
		}
		for _, rt := range k.routes {
			if !slices.Contains(served, rt.pattern()) {
				t.Errorf("kind %s: route %s is not served", kind, rt.pattern())
			}
		}
	}
}

// A registration that misses a part is refused, naming the part.
func TestKindAPIRefusesMissingParts(t *testing.T) {
	whole := kindAPI{kind: schemas.KindSchedule, routes: scheduleRoutes, document: "createSchedule"}
	for name, c := range map[string]struct {
		k    kindAPI
		want string
	}{
		"routes":   {kindAPI{kind: schemas.KindSchedule, document: "createSchedule"}, "kind Schedule registers no routes"},
		"document": {kindAPI{kind: schemas.KindSchedule, routes: scheduleRoutes}, "kind Schedule registers no document route"},
		"another kind's document": {kindAPI{kind: schemas.KindSchedule, routes: slices.Concat(scheduleRoutes, triggerRoutes), document: "applyTrigger"},
			"kind Schedule: its document route applyTrigger does not take a Schedule document"},
	} {
		if err := c.k.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := whole.check(); err != nil {
		t.Errorf("a whole registration is refused: %v", err)
	}
}

// An optional feature is declared on its routes: a server without the rule store does
// not serve the rule routes (404); one without the trigger store answers the trigger
// routes 503 once the call is authorized.
func TestOptionalFeatures(t *testing.T) {
	authn := fakeAuth{}
	member := authn.token(t, "alpha-member", "alpha", api.RoleMember)
	h := testServer(nil, authn).Handler()
	if rec := call(h, "GET", "/v1/workspaces/alpha/notificationrules", member, nil); rec.Code != http.StatusNotFound {
		t.Errorf("rules without a rule store: %d %s, want 404", rec.Code, rec.Body)
	}
	rec := call(h, "GET", "/v1/workspaces/alpha/triggers", member, nil)
	if rec.Code != http.StatusServiceUnavailable || errorCode(t, rec.Body.Bytes()) != api.CodeUnavailable ||
		!strings.Contains(rec.Body.String(), "started without a trigger store") {
		t.Errorf("triggers without a trigger store: %d %s, want 503 naming the trigger store", rec.Code, rec.Body)
	}
	if rec := call(h, "GET", "/v1/workspaces/alpha/triggers", "", nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("triggers without a trigger store, without a token: %d %s, want 401", rec.Code, rec.Body)
	}
	if rec := call(h, "GET", "/v1/workspaces/beta/triggers", member, nil); rec.Code != http.StatusNotFound {
		t.Errorf("another workspace's triggers without a trigger store: %d %s, want 404", rec.Code, rec.Body)
	}
}
