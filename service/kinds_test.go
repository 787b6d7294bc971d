package service

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// Every kind registers with the service layer (kinds.go): a service that an assembled
// Service holds, and whether its objects keep a workspace from being deleted.
func TestEveryKindHasAService(t *testing.T) {
	svc := New(nil, "default", "q", nil)
	// The front end sets these over its stores (NewTriggers, NewRules,
	// NewPipelineTemplates).
	svc.Triggers = &Documents[*schemas.Trigger]{}
	svc.Rules = &Documents[*schemas.NotificationRule]{}
	svc.Templates = &PipelineTemplates{}

	registered := map[schemas.Kind]kindService{}
	for _, k := range serviceKinds {
		if _, dup := registered[k.kind]; dup {
			t.Errorf("kind %s registers twice in serviceKinds (service/kinds.go)", k.kind)
		}
		registered[k.kind] = k
		if !slices.Contains(schemas.Kinds(), k.kind) {
			t.Errorf("serviceKinds registers kind %s, which is not in schemas.Kinds() (schemas/kinds.go)", k.kind)
		}
	}
	for _, kind := range schemas.Kinds() {
		k, ok := registered[kind]
		if !ok {
			t.Errorf("kind %s has no service: register a kindService for it in serviceKinds (service/kinds.go)", kind)
			continue
		}
		if err := k.check(); err != nil {
			t.Errorf("%v (service/kinds.go)", err)
			continue
		}
		if v := reflect.ValueOf(k.service(svc)); !v.IsValid() || v.IsNil() {
			t.Errorf("kind %s: its service is nil in an assembled Service: add it to Service and New (service/service.go)", kind)
		}
	}
}

// A workspace delete is refused naming what it holds, in this order.
func TestHeldKinds(t *testing.T) {
	var held []string
	for _, k := range serviceKinds {
		if k.holds.held {
			info, _ := schemas.Info(k.kind)
			held = append(held, info.Plural)
		}
	}
	if want := []string{"jobs", "experiments", "pipelines", "schedules"}; !slices.Equal(held, want) {
		t.Errorf("a workspace is held by %q, want %q", held, want)
	}
}

// A registration that misses a part is refused, naming the part.
func TestKindServiceRefusesMissingParts(t *testing.T) {
	of := func(s *Service) any { return s.Schedules }
	for name, c := range map[string]struct {
		k    kindService
		want string
	}{
		"service": {kindService{kind: schemas.KindSchedule, holds: heldBy("")}, "kind Schedule registers no service"},
		"holds": {kindService{kind: schemas.KindSchedule, service: of},
			"kind Schedule does not say whether its objects keep a workspace from being deleted"},
		"unknown kind": {kindService{kind: "Foo", service: of, holds: heldBy("")}, "kind Foo is not in schemas.Kinds()"},
	} {
		if err := c.k.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := (kindService{kind: schemas.KindSchedule, service: of, holds: heldBy("")}).check(); err != nil {
		t.Errorf("a whole registration is refused: %v", err)
	}
}
