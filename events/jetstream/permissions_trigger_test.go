package jetstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A workspace's user publishes its own inbound trigger events and no other workspace's,
// nor the outbound fired events.
func TestWorkspaceUsersPublishOnlyTheirTriggerEvents(t *testing.T) {
	_, srv := startSecuredNATS(t, workspaceUser("bob", "b"))
	sys, err := nats.Connect(srv.URL, nats.UserInfo("system", "system-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	sub, err := sys.SubscribeSync("dlc.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Flush(); err != nil {
		t.Fatal(err)
	}
	bob, errs := connectUser(t, srv.URL, "bob", "b")
	for _, subject := range []string{"dlc.a.trigger.retrain", "dlc.b.trigger.retrain.fired", "dlc.b.trigger.retrain"} {
		if err := bob.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if err := bob.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		m, err := sub.NextMsg(time.Second)
		if err != nil {
			break
		}
		got = append(got, m.Subject)
	}
	if len(got) != 1 || got[0] != "dlc.b.trigger.retrain" {
		t.Errorf("messages that got through: %v, want only dlc.b.trigger.retrain", got)
	}
	if len(errs) != 2 {
		t.Errorf("%d permission violations reported, want 2", len(errs))
	}
}

// A read-only user (a viewer) may not publish trigger events, which start jobs: the
// server refuses the publish as a permissions violation and nothing gets through
// (issue 33, finding 8).
func TestReadOnlyUsersPublishNoTriggerEvents(t *testing.T) {
	_, srv := startSecuredNATS(t, workspaceUserOf("vera", "b", false))
	sys, err := nats.Connect(srv.URL, nats.UserInfo("system", "system-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	sub, err := sys.SubscribeSync("dlc.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Flush(); err != nil {
		t.Fatal(err)
	}
	vera, errs := connectUser(t, srv.URL, "vera", "b")
	if err := vera.Publish("dlc.b.trigger.retrain", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = vera.Flush()
	if m, err := sub.NextMsg(time.Second); err == nil {
		t.Errorf("the viewer's trigger event got through on %s", m.Subject)
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation for publish") {
			t.Errorf("the viewer's publish: %v, want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("no permissions violation reported for the viewer's trigger publish")
	}
}

// A workspace's users are not delivered its audit subject, neither through a wildcard
// subscription on the workspace (the server filters it out) nor by name (refused as a
// permissions violation), while the workspace's other events arrive (issue 33,
// finding 8).
func TestWorkspaceUsersReceiveNoAudit(t *testing.T) {
	_, srv := startSecuredNATS(t, workspaceUserOf("vera", "b", false))
	sys, err := nats.Connect(srv.URL, nats.UserInfo("system", "system-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	vera, errs := connectUser(t, srv.URL, "vera", "b")
	all, err := vera.SubscribeSync("dlc.b.>")
	if err != nil {
		t.Fatal(err)
	}
	byName, err := vera.SubscribeSync("dlc.b.audit")
	if err != nil {
		t.Fatal(err)
	}
	_ = vera.Flush()
	for _, subject := range []string{"dlc.b.audit", "dlc.b.job.j.status"} {
		if err := sys.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if err := sys.Flush(); err != nil {
		t.Fatal(err)
	}
	m, err := all.NextMsg(5 * time.Second)
	if err != nil || m.Subject != "dlc.b.job.j.status" {
		t.Fatalf("first message on dlc.b.>: %v, %v; want the status event, the audit record filtered out", m, err)
	}
	if m, err := all.NextMsg(time.Second); err == nil {
		t.Errorf("dlc.b.> delivered %s", m.Subject)
	}
	if m, err := byName.NextMsg(time.Second); err == nil {
		t.Errorf("a subscription on dlc.b.audit delivered %s", m.Subject)
	}
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation for subscription to \"dlc.b.audit\"") {
			t.Errorf("subscribing dlc.b.audit: %v, want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("no permissions violation reported for the subscription on dlc.b.audit")
	}
}
