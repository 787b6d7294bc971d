package notify_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

func TestStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.store

	invalid := webhookRule("a", "bad", "ftp://x.example.com/")
	if _, err := s.Put(e.ctx, invalid); err == nil {
		t.Fatal("Put accepted an invalid rule")
	} else {
		var errs schemas.ErrorList
		if !errors.As(err, &errs) {
			t.Fatalf("Put error %v is not an ErrorList", err)
		}
		if diff := cmp.Diff([]string{"spec.webhook.url"}, errs.Fields()); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	}

	put := func(ws, name string) *schemas.NotificationRule {
		r := webhookRule(ws, name, "https://hooks.example.com/"+name)
		rev, err := s.Put(e.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if rev == 0 {
			t.Errorf("Put returned revision 0")
		}
		return r
	}
	b := put("a", "beta")
	a := put("a", "alpha")
	put("b", "alpha")
	if b.Spec.DeadLetterSubject != "dlc.a.notify.deadletter" || b.Spec.Delivery.MaxAttempts != 5 {
		t.Errorf("Put did not apply defaults: %+v", b.Spec)
	}

	got, err := s.Get(e.ctx, "a", "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("Get (-put +got):\n%s", diff)
	}
	list, err := s.List(e.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*schemas.NotificationRule{a, b}, list); diff != "" {
		t.Errorf("List(a) (-want +got):\n%s", diff)
	}
	if list, err := s.List(e.ctx, "empty"); err != nil || len(list) != 0 {
		t.Errorf("List(empty) = %v, %v; want nothing", list, err)
	}

	if err := s.Delete(e.ctx, "a", "alpha"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(e.ctx, "a", "alpha"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(e.ctx, "a", "alpha"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	list, err = s.List(e.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*schemas.NotificationRule{b}, list); diff != "" {
		t.Errorf("List(a) after Delete (-want +got):\n%s", diff)
	}

	for _, name := range [][2]string{{"*", "x"}, {"a", ">"}, {"a.b", "x"}, {"A", "x"}} {
		if _, err := s.Get(e.ctx, name[0], name[1]); !errors.Is(err, notify.ErrInvalidName) {
			t.Errorf("Get(%q, %q): %v, want ErrInvalidName", name[0], name[1], err)
		}
	}
	if _, err := s.List(e.ctx, "*"); !errors.Is(err, notify.ErrInvalidName) {
		t.Errorf("List(*): %v, want ErrInvalidName", err)
	}
}
