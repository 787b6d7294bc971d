package jetstream_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events/jetstream"
)

// connect starts a NATS server of the test's own and connects a client to it; the
// context ends after a minute. The test's cleanup closes both.
func connect(t *testing.T) (context.Context, *jetstream.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	srv, err := devstack.StartNATS(ctx, devstack.NATSOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := jetstream.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return ctx, c
}

// workspaceUser is a NATS user named name, password name+"-pw", with the permissions
// of workspace ws for a role that may start jobs.
func workspaceUser(name, ws string) devstack.NATSUser { return workspaceUserOf(name, ws, true) }

// workspaceUserOf is workspaceUser for a role that may (mayTrigger) or may not start
// jobs.
func workspaceUserOf(name, ws string, mayTrigger bool) devstack.NATSUser {
	p := jetstream.WorkspacePermissions(ws, mayTrigger)
	return devstack.NATSUser{Name: name, Password: name + "-pw", Publish: p.PublishAllow, Subscribe: p.SubscribeAllow,
		SubscribeDeny: p.SubscribeDeny}
}

// startSecuredNATS starts a NATS server that admits only the user "system" (password
// system-pw, every permission) and users; the context ends after a minute. The test's
// cleanup stops both.
func startSecuredNATS(t *testing.T, users ...devstack.NATSUser) (context.Context, *devstack.NATS) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	srv, err := devstack.StartNATS(ctx, devstack.NATSOptions{Dir: t.TempDir(),
		Users: append([]devstack.NATSUser{{Name: "system", Password: "system-pw"}}, users...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	// The gate that serves readers' JetStream requests, as the API server runs it.
	sys, err := nats.Connect(srv.URL, nats.UserInfo("system", "system-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	gate, err := jetstream.StartGate(sys, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gate.Close() })
	return ctx, srv
}

// connectReader connects the workspaceUser name of workspace ws as a reader client
// (its JetStream requests through the gate). The test's cleanup closes it.
func connectReader(t *testing.T, url, name, ws string) *jetstream.Client {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo(name, name+"-pw"), nats.CustomInboxPrefix(jetstream.InboxPrefix(ws)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := jetstream.NewReader(nc, ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// connectUser connects a plain NATS client as the workspaceUser name of workspace ws;
// the channel receives the asynchronous errors the server reports to it, such as
// permissions violations. The test's cleanup closes it.
func connectUser(t *testing.T, url, name, ws string) (*nats.Conn, chan error) {
	t.Helper()
	errs := make(chan error, 10)
	nc, err := nats.Connect(url, nats.UserInfo(name, name+"-pw"), nats.CustomInboxPrefix(jetstream.InboxPrefix(ws)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}
