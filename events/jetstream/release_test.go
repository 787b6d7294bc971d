package jetstream_test

import (
	"fmt"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
)

// Every kind of read deletes its consumer when it ends, so a stack that reads more
// often than nats-server's default limit of consumers per stream (1,000) within an
// ephemeral consumer's inactive threshold never reaches it. Before, each read left its
// consumer for nats.go's 5 minutes, and read 1,001 was refused with "maximum consumers
// limit reached" (as CI saw: a purge and the experiments' metric reads refused).
func TestReadsReleaseTheirConsumers(t *testing.T) {
	ctx, c := connect(t)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	const perStreamLimit = 1000 // nats-server's JSDefaultMaxConsumersPerStream
	subject := events.JobMetricsSubject("ws", "j")
	for i := range 3 {
		if err := c.Publish(ctx, events.Msg{Subject: subject, ID: fmt.Sprint("m", i), Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	var inactive []time.Duration
	defer jetstream.SetConsumerPlaced(func(ci *natsjs.ConsumerInfo) { inactive = append(inactive, ci.Config.InactiveThreshold) })()
	count := func(string, []byte) error { return nil }
	reads := []struct {
		name string
		read func() error
	}{
		{"ReadUntil", func() error { return c.ReadUntil(ctx, jetstream.EventsStream, subject, nil, count) }},
		{"ReadUntil of a subject with nothing", func() error {
			return c.ReadUntil(ctx, jetstream.EventsStream, events.JobMetricsSubject("ws", "none"), nil, count)
		}},
		{"ReadSince", func() error {
			return c.ReadSince(ctx, jetstream.EventsStream, subject, time.Now().Add(-time.Hour), nil, count)
		}},
		{"ReadAfter", func() error {
			return c.ReadAfter(ctx, jetstream.EventsStream, subject, 0, 10, 0, func(uint64, []byte) error { return nil })
		}},
		{"DeleteWhere", func() error {
			_, err := c.DeleteWhere(ctx, jetstream.EventsStream, subject, func([]byte) bool { return false })
			return err
		}},
	}
	n := 0
	for n <= perStreamLimit {
		for _, r := range reads {
			if err := r.read(); err != nil {
				t.Fatalf("read %d (%s): %v", n+1, r.name, err)
			}
			n++
		}
	}
	// nats.go deletes an ordered consumer's previous consumer in the background when it
	// makes a new one (a Next on the consumer itself, or a reset): wait a moment for those.
	left := -1
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("the consumers of %d reads on %s to be gone", n, jetstream.EventsStream), func() error {
		st, err := c.JetStream().Stream(ctx, jetstream.EventsStream)
		if err != nil {
			return err
		}
		if left = st.CachedInfo().State.Consumers; left != 0 {
			return fmt.Errorf("%d consumers left, want none", left)
		}
		return nil
	}, 50*time.Millisecond)
	for _, d := range inactive {
		if d != jetstream.ReadInactive {
			t.Fatalf("a read's consumer has inactive threshold %s, want %s", d, jetstream.ReadInactive)
		}
	}
	if len(inactive) == 0 {
		t.Fatal("no read's consumer was seen")
	}
	t.Logf("%d reads, %d consumers left", n, left)
}
