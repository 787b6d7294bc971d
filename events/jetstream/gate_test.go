package jetstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
)

// A workspace reader's consumers, through the gate: the JetStream API itself is refused
// by the server (a permissions violation); the gate refuses a durable consumer, a name
// of the stack's (dlc-notify-...), a push consumer or a pull request delivering outside
// the reader's inbox (into another workspace's subjects), a long inactive threshold and
// more than MaxReaderConsumers consumers of the workspace on a stream; nothing of those
// exists afterwards and b's subjects got nothing. Ephemeral pull consumers, ordered
// reads and push consumers delivering into the inbox work (issue 33, findings 7 and 8).
func TestReaderConsumersThroughTheGate(t *testing.T) {
	ctx, srv := startSecuredNATS(t, workspaceUser("alice", "a"))
	sys, err := jetstream.Connect(srv.URL, nats.UserInfo("system", "system-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if err := sys.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sys.Publish(ctx, events.Msg{Subject: events.JobStatusSubject("a", "j"), ID: "a-status", Data: []byte(`{"ws":"a"}`)}); err != nil {
		t.Fatal(err)
	}
	spy, err := nats.Connect(srv.URL, nats.UserInfo("system", "system-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	intoB, err := spy.SubscribeSync("dlc.b.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	nc, violations := connectUser(t, srv.URL, "alice", "a")
	direct, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := direct.CreateConsumer(short, jetstream.EventsStream, natsjs.ConsumerConfig{FilterSubject: "dlc.a.>"}); err == nil {
		t.Error("a consumer created on $JS.API directly")
	}
	cancel()
	select {
	case err := <-violations:
		if !strings.Contains(err.Error(), `Publish to "$JS.API.CONSUMER.CREATE.DLC_EVENTS.`) {
			t.Errorf("direct consumer create: %v, want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("no permissions violation for a consumer create on $JS.API")
	}

	gated, err := natsjs.NewWithAPIPrefix(nc, jetstream.ReaderAPIPrefix("a"))
	if err != nil {
		t.Fatal(err)
	}
	for what, cfg := range map[string]natsjs.ConsumerConfig{
		"a durable consumer":          {Durable: "mine", FilterSubject: "dlc.a.>"},
		"the dispatcher's name":       {Name: "dlc-notify-b_" + strings.Repeat("a", 26), FilterSubject: "dlc.a.>"},
		"a push consumer into b":      {DeliverSubject: "dlc.b.job.j.status", FilterSubject: "dlc.a.>"},
		"a push consumer into _INBOX": {DeliverSubject: "_INBOX.x", FilterSubject: "dlc.a.>"},
		"a day of inactivity":         {InactiveThreshold: 24 * time.Hour, FilterSubject: "dlc.a.>"},
	} {
		if _, err := gated.CreateConsumer(ctx, jetstream.EventsStream, cfg); err == nil || !strings.Contains(err.Error(), "opendlc:") {
			t.Errorf("%s: %v, want the gate's refusal", what, err)
		}
	}
	// A pull request whose reply is b's subject is dropped.
	pull, err := gated.CreateConsumer(ctx, jetstream.EventsStream, natsjs.ConsumerConfig{FilterSubject: "dlc.a.>", AckPolicy: natsjs.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	next := jetstream.ReaderAPIPrefix("a") + ".CONSUMER.MSG.NEXT." + jetstream.EventsStream + "." + pull.CachedInfo().Name
	if err := nc.PublishRequest(next, "dlc.b.job.j.status", []byte(`{"batch":1,"expires":500000000}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The legitimate reads: the pull consumer, an ordered read, a push consumer into the
	// inbox.
	batch, err := pull.Fetch(1, natsjs.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 1 {
		t.Errorf("the pull consumer delivered %d events, want 1", n)
	}
	if got := readAll(ctx, t, connectReader(t, srv.URL, "alice", "a"), jetstream.EventsStream, "dlc.a.>"); len(got) != 1 {
		t.Errorf("ordered read of a's events: %v", got)
	}
	inbox := jetstream.InboxPrefix("a") + ".push"
	pushed, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gated.CreateConsumer(ctx, jetstream.EventsStream, natsjs.ConsumerConfig{
		DeliverSubject: inbox, FilterSubject: "dlc.a.>", AckPolicy: natsjs.AckNonePolicy}); err != nil {
		t.Fatalf("a push consumer into the reader's inbox: %v", err)
	}
	if _, err := pushed.NextMsg(5 * time.Second); err != nil {
		t.Errorf("the push consumer into the inbox delivered nothing: %v", err)
	}
	if m, err := intoB.NextMsg(time.Second); err == nil {
		t.Errorf("b's subjects got %s", m.Subject)
	}

	// The bound: the workspace's consumers on the stream, at most MaxReaderConsumers.
	s, err := sys.JetStream().Stream(ctx, jetstream.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	have := 0
	for range s.ListConsumers(ctx).Info() {
		have++
	}
	for i := have; i < jetstream.MaxReaderConsumers; i++ {
		if _, err := gated.CreateConsumer(ctx, jetstream.EventsStream, natsjs.ConsumerConfig{
			FilterSubject: "dlc.a.>", AckPolicy: natsjs.AckNonePolicy, InactiveThreshold: time.Minute}); err != nil {
			t.Fatalf("consumer %d: %v", i+1, err)
		}
	}
	_, err = gated.CreateConsumer(ctx, jetstream.EventsStream, natsjs.ConsumerConfig{FilterSubject: "dlc.a.>", AckPolicy: natsjs.AckNonePolicy})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("hold %d consumers", jetstream.MaxReaderConsumers)) {
		t.Errorf("consumer %d: %v, want the gate's refusal", jetstream.MaxReaderConsumers+1, err)
	}
	durables := 0
	for info := range s.ListConsumers(ctx).Info() {
		if info.Config.Durable != "" || strings.HasPrefix(info.Name, "dlc-") {
			durables++
		}
	}
	if durables != 0 {
		t.Errorf("%d durable or dlc- consumers exist", durables)
	}
}
