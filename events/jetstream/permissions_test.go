package jetstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
)

// A user of workspace B reads B's events and logs, and is refused A's: JetStream
// consumers filtered on A's subjects, and live subscriptions to them.
func TestWorkspaceUsersReadOnlyTheirSubjects(t *testing.T) {
	ctx, srv := startSecuredNATS(t, workspaceUser("alice", "a"), workspaceUser("bob", "b"))

	if _, err := jetstream.Connect(srv.URL); err == nil {
		t.Fatal("an anonymous client connected")
	}
	sys, err := jetstream.Connect(srv.URL, nats.UserInfo("system", "system-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if err := sys.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{"a", "b"} {
		if err := sys.Publish(ctx,
			events.Msg{Subject: events.JobStatusSubject(ws, "j"), ID: ws + "-status", Data: []byte(`{"ws":"` + ws + `"}`)},
			events.Msg{Subject: events.JobLogSubject(ws, "j", "worker", 0), ID: ws + "-log", Data: []byte(`{"ws":"` + ws + `"}`)},
		); err != nil {
			t.Fatal(err)
		}
	}

	bob := connectReader(t, srv.URL, "bob", "b")

	// A refused consumer request gets no answer: the read ends at its deadline.
	read := func(c *jetstream.Client, stream, filter string) ([]string, error) {
		var got []string
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := c.ReadUntil(rctx, stream, filter, nil, func(_ string, data []byte) error {
			got = append(got, string(data))
			return nil
		})
		return got, err
	}
	got, err := read(bob, jetstream.EventsStream, events.JobStatusSubject("b", "j"))
	if err != nil || len(got) != 1 || !strings.Contains(got[0], `"b"`) {
		t.Errorf("bob reading b's events: %v, %v", got, err)
	}
	if got, err := read(bob, jetstream.LogsStream, events.JobLogsFilter("b", "j")); err != nil || len(got) != 1 {
		t.Errorf("bob reading b's logs: %v, %v", got, err)
	}
	if got, err := read(bob, jetstream.EventsStream, events.JobStatusSubject("a", "j")); err == nil {
		t.Errorf("bob read a's events: %v", got)
	}
	if got, err := read(bob, jetstream.LogsStream, events.JobLogsFilter("a", "j")); err == nil {
		t.Errorf("bob read a's logs: %v", got)
	}

	// A live subscription to a's subjects is refused by the server.
	nc, violations := connectUser(t, srv.URL, "bob", "b")
	sub, err := nc.SubscribeSync("dlc.a.>")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("async error %v, want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no permissions violation reported for a subscription to dlc.a.>")
	}
	if err := sys.Publish(ctx, events.Msg{Subject: events.JobStatusSubject("a", "j"), ID: "a-status-2", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(500 * time.Millisecond); err == nil {
		t.Fatalf("bob received %s on a's subject", m.Subject)
	}

	alice := connectReader(t, srv.URL, "alice", "a")
	if got, err := read(alice, jetstream.EventsStream, events.JobStatusSubject("a", "j")); err != nil || len(got) != 2 {
		t.Errorf("alice reading a's events: %v, %v", got, err)
	}
}
