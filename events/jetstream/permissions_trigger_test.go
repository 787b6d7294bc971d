package jetstream_test

import (
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
