package notify_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
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
	// The upgrade brings the bucket that records the dispatcher's consumers: the
	// legacy consumer is older than it.
	if err := e.js.DeleteKeyValue(e.ctx, dlcjs.NotifyConsumersBucket); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateKeyValue(e.ctx, jetstream.KeyValueConfig{Bucket: dlcjs.NotifyConsumersBucket}); err != nil {
		t.Fatal(err)
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

// A consumer that someone else created with a name of the dispatcher's pattern (a
// workspace reader may create durable consumers in its own workspace) is never adopted,
// re-filtered or read: not when the workspace's first rule appears, not when a
// restarted dispatcher looks for its consumer. It is deleted, and it never holds an
// event of the workspace it names (issue 33, finding 4).
func TestPlantedConsumerIsNotAdopted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	plant := func(secret string) string {
		t.Helper()
		name := notify.DefaultConsumerPrefix + "-a_" + secret
		// As workspace b's reader could: its own filter, a durable name like a's.
		if _, err := e.js.CreateConsumer(e.ctx, dlcjs.EventsStream, jetstream.ConsumerConfig{
			Durable: name, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "dlc.b.>",
		}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	planted := []string{plant(strings.Repeat("a", 26))}
	d1 := e.start()
	e.put(d1, webhookRule("a", "all", rc.url()))
	want := e.running("a", "j", 1, 2)
	rc.waitDelivered(2)
	e.waitProcessed("a")
	c, err := e.consumer("a")
	if err != nil {
		t.Fatal(err)
	}
	name := c.CachedInfo().Name
	if name == planted[0] {
		t.Fatalf("the dispatcher reads the planted consumer %s", name)
	}
	// Planted while the dispatcher runs, sorting before its own, then a restart.
	planted = append(planted, plant(strings.Repeat("2", 26)))
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if err := d1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, e.running("a", "j", 3, 4)...)
	e.restartDelivers(rc, "a", want, "events published while down delivered")
	if c, err = e.consumer("a"); err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Name; got != name {
		t.Errorf("after the restart the dispatcher reads %q, want its own %q", got, name)
	}
	for _, p := range planted {
		if info, err := e.js.Consumer(e.ctx, dlcjs.EventsStream, p); err == nil {
			t.Errorf("planted consumer %s still exists, filter %q, %d delivered", p, info.CachedInfo().Config.FilterSubject, info.CachedInfo().Delivered.Stream)
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
	}
}
