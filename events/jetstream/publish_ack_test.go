package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
)

// A message whose acknowledgement never comes (here: a subscriber takes it and never
// answers, as a stream leader that dies with the message does, while the publisher's
// connection stays up) fails Publish after the acknowledgement timeout, both alone and
// in a batch, instead of holding the publisher (the log forwarder) until its context
// ends.
func TestPublishGivesUpOnALostAcknowledgement(t *testing.T) {
	const ackTimeout = 500 * time.Millisecond
	defer jetstream.SetPublishAckTimeout(ackTimeout)()
	ctx, c := connect(t)
	got := make(chan string, 16)
	sub, err := c.Conn().Subscribe("lost.>", func(m *nats.Msg) { got <- m.Subject }) // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection closes at the test's end
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, n := range []int{1, 3} {
		msgs := make([]events.Msg, n)
		for i := range msgs {
			msgs[i] = events.Msg{Subject: fmt.Sprintf("lost.%d.%d", n, i), ID: fmt.Sprint(n, i), Data: []byte("x")}
		}
		start := time.Now()
		err := c.Publish(ctx, msgs...)
		took := time.Since(start)
		if err == nil {
			t.Fatalf("publish of %d message(s) without an acknowledgement: no error", n)
		}
		for range n {
			select {
			case <-got:
			case <-time.After(5 * time.Second):
				t.Fatalf("publish of %d message(s): the subscriber did not get them all, so no acknowledgement was lost", n)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("publish of %d message(s) waited until the caller's context ended: %v", n, err)
		}
		t.Logf("publish of %d message(s) without an acknowledgement failed after %s: %v", n, took.Round(time.Millisecond), err)
	}
}
