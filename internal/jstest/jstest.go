// Package jstest starts, for a test, a NATS server of its own with every OpenDLC
// stream and bucket declared: what the tests of the packages built on JetStream
// (notify, triggers) start from.
package jstest

import (
	"context"
	"testing"

	"github.com/opendlc/opendlc/devstack"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// Start starts a NATS server in a temporary directory, connects to it and declares the
// streams and buckets (jetstream.EnsureStreams); the test's cleanup stops both. It
// answers the connection and the server's URL (for a plain NATS connection).
func Start(t testing.TB, ctx context.Context) (c *dlcjs.Client, url string) {
	t.Helper()
	n, err := devstack.StartNATS(ctx, devstack.NATSOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	c, err = dlcjs.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	return c, n.URL
}
