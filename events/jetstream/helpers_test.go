package jetstream_test

import (
	"context"
	"testing"
	"time"

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
