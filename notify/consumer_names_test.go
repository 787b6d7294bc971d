package notify_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/notify"
)

// A workspace's durable consumer has an unguessable name, which a restarted
// dispatcher finds again and resumes: nothing lost, nothing repeated.
func TestConsumerNameIsRandomAndKeptAcrossRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d1 := e.start()
	e.put(d1, webhookRule("a", "all", rc.url()))
	want := e.running("a", "j", 1, 3)
	rc.waitDelivered(3)
	e.waitProcessed("a")
	c, err := e.consumer("a")
	if err != nil {
		t.Fatal(err)
	}
	name := c.CachedInfo().Name
	if !regexp.MustCompile(`^dlc-notify-a_[a-z2-7]{26}$`).MatchString(name) {
		t.Fatalf("consumer name %q: want dlc-notify-a_ and 26 random characters", name)
	}
	if _, err := e.js.Consumer(e.ctx, dlcjs.EventsStream, notify.DefaultConsumerPrefix+"-a"); err == nil {
		t.Error("the guessable name dlc-notify-a exists")
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if err := d1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, e.running("a", "j", 4, 6)...)
	e.restartDelivers(rc, "a", want, "3 events published while down delivered")
	c, err = e.consumer("a")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Name; got != name {
		t.Errorf("after the restart the consumer is %q, want the same %q", got, name)
	}
	if n := len(rc.all()); n != 6 {
		t.Errorf("%d requests, want 6", n)
	}
}

// The guessable consumer of an earlier version is replaced by a random one that starts
// at its first unacknowledged event, and deleted.
func TestLegacyConsumerIsTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	p := e.running("a", "j", 1, 4)
	// An earlier version's consumer that has acknowledged events 1 and 2.
	legacy := notify.DefaultConsumerPrefix + "-a"
	c, err := e.js.CreateConsumer(e.ctx, dlcjs.EventsStream, jetstream.ConsumerConfig{
		Durable: legacy, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "dlc.a.>",
		DeliverPolicy: jetstream.DeliverAllPolicy, MaxAckPending: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		b, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			if err := m.DoubleAck(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	info, err := c.Info(e.ctx)
	if err != nil || info.AckFloor.Stream == 0 {
		t.Fatalf("legacy consumer acknowledged nothing: %+v, %v", info, err)
	}
	// The rule exists when the dispatcher starts, as after an upgrade.
	e.put(nil, webhookRule("a", "all", rc.url()))
	e.start()
	rc.waitDelivered(2)
	e.waitProcessed("a")
	wantEqual(t, "delivered by the new consumer", p[2:], rc.delivered())
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if _, err := e.js.Consumer(ctx, dlcjs.EventsStream, legacy); err == nil {
		t.Error("the legacy consumer still exists")
	}
}
