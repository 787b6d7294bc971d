package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// Every NATS verb a reader of workspace a could try against workspace b's subjects,
// b's consumers, the notification dispatcher's durable consumer of b, the streams and
// the key-value and object stores is refused by the server (a permissions violation);
// afterwards b's reader and the durable consumer work as before, and nothing was
// deleted, purged or published.
func TestWorkspaceUserIsRefusedEveryVerbOnOthers(t *testing.T) {
	ctx, srv := startSecuredNATS(t, workspaceUser("alice", "a"), workspaceUser("bob", "b"))
	sys, err := jetstream.Connect(srv.URL, nats.UserInfo("system", "system-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if err := sys.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	js := sys.JetStream()
	for _, ws := range []string{"a", "b"} {
		if err := sys.Publish(ctx,
			events.Msg{Subject: events.JobStatusSubject(ws, "j"), ID: ws + "-status", Data: []byte(`{"ws":"` + ws + `"}`)},
			events.Msg{Subject: events.JobLogSubject(ws, "j", "worker", 0), ID: ws + "-log", Data: []byte(`{"ws":"` + ws + `"}`)},
		); err != nil {
			t.Fatal(err)
		}
	}

	// The real notification dispatcher, with a rule of b: its durable consumer of b.
	rules, err := notify.OpenStore(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rules.Put(ctx, &schemas.NotificationRule{
		APIVersion: schemas.APIVersion, Kind: schemas.KindNotificationRule,
		Metadata: schemas.ObjectMeta{Name: "fwd", Workspace: "b"},
		Spec:     schemas.NotificationRuleSpec{Match: schemas.NotificationMatch{Types: []string{events.TypeJobPhase}}, Subject: "dlc.b.notify.fwd"},
	}); err != nil {
		t.Fatal(err)
	}
	d, err := notify.StartDispatcher(ctx, js, notify.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close(context.Background()) }() // before sys closes
	var durable string
	testutil.Eventually(t, 20*time.Second, "the dispatcher's consumer of b", func() error {
		durable, err = notify.ConsumerNameOf(ctx, js, notify.DefaultConsumerPrefix, "b")
		if err == nil && durable == "" {
			return errors.New("no consumer yet")
		}
		return err
	})
	// An object store, which no workspace user may reach.
	obj, err := js.CreateObjectStore(ctx, natsjs.ObjectStoreConfig{Bucket: "MODELS"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.PutBytes(ctx, "b/model.pt", []byte("weights")); err != nil {
		t.Fatal(err)
	}

	// Bob's own ephemeral consumer, made as a reader makes one (its name is random).
	bob := connectReader(t, srv.URL, "bob", "b")
	bobCons, err := bob.JetStream().CreateConsumer(ctx, jetstream.EventsStream, natsjs.ConsumerConfig{
		FilterSubject: "dlc.b.>", AckPolicy: natsjs.AckNonePolicy, InactiveThreshold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	bobName := bobCons.CachedInfo().Name
	before := stateOf(ctx, t, js, durable)

	alice, violations := connectUser(t, srv.URL, "alice", "a")
	v := &verbs{t: t, nc: alice, violations: violations}

	// Live subscriptions: b's subjects and inbox, every inbox, advisories (which name
	// consumers), the key-value and object stores' subjects.
	for _, s := range []string{"dlc.b.>", "dlc.b.job.j.status", "dlc.*.job.*.status", ">", "_INBOX_b.>", "_INBOX.>",
		"$JS.EVENT.>", "$JS.EVENT.ADVISORY.CONSUMER.CREATED.DLC_EVENTS.*", "$KV.DLC_RULES.>", "$O.MODELS.>", "$JS.ACK.>"} {
		v.subscribeRefused(s)
	}
	// Publishing b's events and triggers, and JetStream API requests on b's consumers
	// (bob's ephemeral and the dispatcher's durable, by their real names), on
	// consumers by listing, on the streams, on messages and on the stores.
	for _, s := range []string{
		events.JobStatusSubject("b", "j"), "dlc.b.trigger.retrain", "dlc.b.notify.fwd", "dlc.a.job.j.status",
		"$JS.API.CONSUMER.CREATE.DLC_EVENTS.x.dlc.b.>", "$JS.API.CONSUMER.CREATE.DLC_LOGS.x.dlc.b.job.j.logs.>",
		"$JS.API.CONSUMER.CREATE.DLC_EVENTS.x.dlc.*.>", "$JS.API.CONSUMER.CREATE.DLC_EVENTS.x",
		"$JS.API.CONSUMER.CREATE.DLC_EVENTS", "$JS.API.CONSUMER.DURABLE.CREATE.DLC_EVENTS.x",
		"$JS.API.CONSUMER.CREATE.DLC_AUDIT.x.dlc.a.>", "$JS.API.CONSUMER.CREATE.DLC_INBOUND.x.dlc.a.>",
		"$JS.API.CONSUMER.DELETE.DLC_EVENTS." + bobName, "$JS.API.CONSUMER.DELETE.DLC_EVENTS." + durable,
		"$JS.API.CONSUMER.PAUSE.DLC_EVENTS." + durable, "$JS.API.CONSUMER.UNPIN.DLC_EVENTS." + durable,
		"$JS.API.CONSUMER.LIST.DLC_EVENTS", "$JS.API.CONSUMER.NAMES.DLC_EVENTS",
		"$JS.API.CONSUMER.LIST.DLC_LOGS", "$JS.API.CONSUMER.NAMES.DLC_LOGS",
		"$JS.API.STREAM.INFO.DLC_EVENTS", "$JS.API.STREAM.INFO.DLC_LOGS", "$JS.API.STREAM.LIST", "$JS.API.STREAM.NAMES",
		"$JS.API.STREAM.PURGE.DLC_EVENTS", "$JS.API.STREAM.DELETE.DLC_EVENTS", "$JS.API.STREAM.UPDATE.DLC_EVENTS",
		"$JS.API.STREAM.CREATE.STEAL", "$JS.API.INFO",
		"$JS.API.STREAM.MSG.GET.DLC_EVENTS", "$JS.API.STREAM.MSG.DELETE.DLC_EVENTS",
		"$JS.API.DIRECT.GET.DLC_EVENTS", "$JS.API.DIRECT.GET.DLC_EVENTS." + events.JobStatusSubject("b", "j"),
		"$JS.API.STREAM.INFO.KV_DLC_RULES", "$JS.API.DIRECT.GET.KV_DLC_RULES.$KV.DLC_RULES.b.fwd", "$KV.DLC_RULES.b.fwd",
		"$JS.API.DIRECT.GET.KV_DLC_AUTH.$KV.DLC_AUTH.>", "$JS.API.STREAM.MSG.GET.KV_DLC_AUTH",
		"$JS.API.STREAM.INFO.OBJ_MODELS", "$JS.API.STREAM.MSG.GET.OBJ_MODELS", "$O.MODELS.C.x",
	} {
		v.requestRefused(s, []byte(`{"stream_name":"DLC_EVENTS","config":{"filter_subject":"dlc.b.>"},"seq":1,"last_by_subj":"dlc.b.job.j.status"}`))
	}
	// DELETE, INFO and MSG.NEXT with an empty body too (the server wants none for some).
	for _, s := range []string{"$JS.API.CONSUMER.DELETE.DLC_EVENTS." + bobName, "$JS.API.CONSUMER.DELETE.DLC_EVENTS." + durable,
		"$JS.API.CONSUMER.DELETE.DLC_EVENTS.dlc-notify-b", "$JS.API.STREAM.INFO.DLC_EVENTS", "$JS.API.CONSUMER.NAMES.DLC_EVENTS"} {
		v.requestRefused(s, nil)
	}
	v.noAnswers()
	// A consumer whose create subject names a's filter but whose body asks for b's: the
	// server holds the two together and refuses.
	if resp, err := alice.Request(jetstream.ReaderAPIPrefix("a")+".CONSUMER.CREATE.DLC_EVENTS.sneaky.dlc.a.>",
		[]byte(`{"stream_name":"DLC_EVENTS","config":{"name":"sneaky","filter_subject":"dlc.b.>","ack_policy":"none"}}`), 5*time.Second); err != nil ||
		!strings.Contains(string(resp.Data), `"error"`) {
		t.Errorf("consumer create with a's subject and b's filter: %v, %v", responseOf(resp), err)
	}
	// By name, a consumer is reachable only by whoever knows the name: the old,
	// guessable name of the dispatcher's consumer is not found.
	api := jetstream.ReaderAPIPrefix("a")
	for s, body := range map[string]string{api + ".CONSUMER.INFO.DLC_EVENTS.dlc-notify-b": "", api + ".CONSUMER.MSG.NEXT.DLC_EVENTS.dlc-notify-b": `{"batch":1,"expires":500000000}`} {
		resp, err := alice.Request(s, []byte(body), 2*time.Second)
		if err == nil && !strings.Contains(string(resp.Data), "consumer not found") && resp.Header.Get("Status") != "404" {
			t.Errorf("%s answered %s", s, responseOf(resp))
		}
	}
	// The high-level clients fail the same way.
	aliceJS, err := natsjs.New(alice)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := aliceJS.KeyValue(short, "DLC_RULES"); err == nil {
		t.Error("alice opened the rules bucket")
	}
	if _, err := aliceJS.ObjectStore(short, "MODELS"); err == nil {
		t.Error("alice opened the object store")
	}
	// Alice's own reads still work: the refusals are not a broken connection.
	aliceC, err := jetstream.NewReader(alice, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(ctx, t, aliceC, jetstream.EventsStream, "dlc.a.>"); len(got) != 1 {
		t.Errorf("alice reading a's events: %v", got)
	}

	// b's consumers are untouched and work.
	after := stateOf(ctx, t, js, durable)
	if after != before {
		t.Errorf("after the attempts: %+v, before %+v", after, before)
	}
	info, err := bobCons.Info(ctx)
	if err != nil {
		t.Fatalf("bob's consumer after the attempts: %v", err)
	}
	batch, err := bobCons.FetchNoWait(10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 1 || info.NumPending != 1 {
		t.Errorf("bob's consumer delivered %d messages (%d pending), want b's 1 event", n, info.NumPending)
	}
	if got := readAll(ctx, t, bob, jetstream.EventsStream, "dlc.b.>"); len(got) != 1 {
		t.Errorf("bob reading b's events: %v", got)
	}
	if err := sys.Publish(ctx, events.Msg{Subject: events.JobStatusSubject("b", "j"), ID: "b-phase", Data: phaseEvent(t, "b")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the dispatcher forwarding b's phase event", func() error {
		s, err := js.Stream(ctx, jetstream.NotifyStream)
		if err != nil {
			return err
		}
		_, err = s.GetLastMsgForSubject(ctx, "dlc.b.notify.fwd")
		return err
	})
}

// verbs sends a's requests and checks the server refused them.
type verbs struct {
	t          *testing.T
	nc         *nats.Conn
	violations chan error
	replies    *nats.Subscription
}

// requestRefused publishes a request on subject, with a reply subject in a's inbox,
// and wants a permissions violation for it; noAnswers checks that none was answered.
func (v *verbs) requestRefused(subject string, body []byte) {
	v.t.Helper()
	if v.replies == nil {
		var err error
		if v.replies, err = v.nc.SubscribeSync(jetstream.InboxPrefix("a") + ".verbs"); err != nil {
			v.t.Fatal(err)
		}
	}
	if err := v.nc.PublishRequest(subject, v.replies.Subject, body); err != nil {
		v.t.Fatal(err)
	}
	if err := v.nc.Flush(); err != nil {
		v.t.Fatal(err)
	}
	v.waitViolation("publish to", subject)
}

// noAnswers checks that no refused request was answered.
func (v *verbs) noAnswers() {
	v.t.Helper()
	if v.replies == nil {
		return
	}
	if err := v.nc.Flush(); err != nil {
		v.t.Fatal(err)
	}
	if m, err := v.replies.NextMsg(500 * time.Millisecond); err == nil {
		v.t.Errorf("a refused request was answered: %s", m.Data)
	}
}

// subscribeRefused subscribes to subject and wants a permissions violation for it.
func (v *verbs) subscribeRefused(subject string) {
	v.t.Helper()
	sub, err := v.nc.SubscribeSync(subject)
	if err != nil {
		if !errors.Is(err, nats.ErrPermissionViolation) {
			v.t.Errorf("subscribe %s: %v", subject, err)
		}
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	v.waitViolation("subscription to", subject)
}

// waitViolation waits for the server's permissions violation that names subject.
func (v *verbs) waitViolation(what, subject string) {
	v.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-v.violations:
			msg := strings.ToLower(err.Error())
			if strings.Contains(msg, "permissions violation") && strings.Contains(msg, what) &&
				strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-timeout:
			v.t.Errorf("no permissions violation for %s %q", what, subject)
			return
		}
	}
}

// responseOf is a reply for messages.
func responseOf(m *nats.Msg) string {
	if m == nil {
		return "<none>"
	}
	return string(m.Data)
}

// streamState is what an attacker could have changed: the durable consumer's
// position and the streams' contents.
type streamState struct {
	durable                          string
	delivered, ackFloor, pending     uint64
	eventMsgs, logMsgs, ruleBucketMs uint64
}

func stateOf(ctx context.Context, t *testing.T, js natsjs.JetStream, durable string) streamState {
	t.Helper()
	c, err := js.Consumer(ctx, jetstream.EventsStream, durable)
	if err != nil {
		t.Fatalf("durable consumer %s: %v", durable, err)
	}
	info := c.CachedInfo()
	s := streamState{durable: info.Name, delivered: info.Delivered.Stream, ackFloor: info.AckFloor.Stream, pending: info.NumPending}
	for name, n := range map[string]*uint64{jetstream.EventsStream: &s.eventMsgs, jetstream.LogsStream: &s.logMsgs, "KV_DLC_RULES": &s.ruleBucketMs} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		*n = st.CachedInfo().State.Msgs
	}
	return s
}

// readAll reads every stored message of filter.
func readAll(ctx context.Context, t *testing.T, c *jetstream.Client, stream, filter string) []string {
	t.Helper()
	var got []string
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.ReadUntil(rctx, stream, filter, nil, func(_ string, data []byte) error {
		got = append(got, string(data))
		return nil
	}); err != nil {
		t.Errorf("read %s: %v", filter, err)
	}
	return got
}

// phaseEvent is a job phase event of workspace ws.
func phaseEvent(t *testing.T, ws string) []byte {
	t.Helper()
	ev, err := events.New(ws+"-uid:status:1", events.TypeJobPhase, ws, events.JobSource(ws, "j"), "j", time.Now(),
		events.JobPhaseData{Job: "j", UID: ws + "-uid", Seq: 1, Phase: string(schemas.JobRunning)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
