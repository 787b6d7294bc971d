package integration

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

// natsReader connects to the stack's NATS as a reader of ws with a new token of role;
// the channel receives the server's asynchronous errors (permissions violations).
func natsReader(t *testing.T, ctx context.Context, ws string, role api.Role) (*nats.Conn, chan error) {
	t.Helper()
	name := fmt.Sprintf("nats-%s-%s", role, ws)
	tok, err := env.api.CreateToken(ctx, api.TokenRequest{Name: name, Workspace: ws, Role: role, TTL: schemas.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), name) })
	errs := make(chan error, 64)
	nc, err := nats.Connect(env.e.Stack.NATS.URL, nats.UserInfo(ws, tok.Secret), nats.CustomInboxPrefix(jetstream.InboxPrefix(ws)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatalf("%s reader of %s: %v", role, ws, err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// A viewer of workspace p tries to plant a consumer on its own events named like the
// notification dispatcher's consumer of workspace v (dlc-notify-v_ and 26 characters)
// before v's first rule: on the JetStream API the server refuses it (a permissions
// violation), through the reader gate (durable or ephemeral) the gate refuses it. The
// dispatcher then reads a consumer of its own, and forwards v's events as the rule
// says; no consumer of the planted name exists (issue 33, finding 4; the dispatcher's
// side, which adopts only consumers it recorded, is notify's
// TestPlantedConsumerIsNotAdopted).
func TestNATSPlantedNotifyConsumer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	p, v := "natsplant-p", "natsplant-v"
	for _, ws := range []string{p, v} {
		ensureWorkspace(t, ctx, ws)
	}
	reader, violations := natsReader(t, ctx, p, api.RoleViewer)
	planted := notify.DefaultConsumerPrefix + "-" + v + "_" + strings.Repeat("a", 26)
	direct, err := natsjs.New(reader)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := direct.CreateConsumer(short, jetstream.EventsStream, natsjs.ConsumerConfig{
		Durable: planted, FilterSubject: "dlc." + p + ".>", AckPolicy: natsjs.AckNonePolicy,
	}); err == nil {
		t.Fatal("the viewer planted a durable consumer on $JS.API")
	}
	waitViolation(t, violations, "$JS.API.CONSUMER.CREATE."+jetstream.EventsStream+"."+planted)
	gated, err := natsjs.NewWithAPIPrefix(reader, jetstream.ReaderAPIPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []natsjs.ConsumerConfig{
		{Durable: planted, FilterSubject: "dlc." + p + ".>", AckPolicy: natsjs.AckNonePolicy},
		{Name: planted, FilterSubject: "dlc." + p + ".>", AckPolicy: natsjs.AckNonePolicy},
	} {
		if _, err := gated.CreateConsumer(ctx, jetstream.EventsStream, cfg); err == nil || !strings.Contains(err.Error(), "opendlc:") {
			t.Errorf("planting %+v through the gate: %v, want the gate's refusal", cfg, err)
		}
	}
	if _, err := env.api.ApplyRule(ctx, ruleDoc(v, "fwd")); err != nil {
		t.Fatal(err)
	}
	var own string
	testutil.Eventually(t, itest.Left(ctx), "v's notification consumer", func() bool {
		own, err = notify.ConsumerNameOf(ctx, env.events.JetStream(), notify.DefaultConsumerPrefix, v)
		return err == nil && own != ""
	}, itest.PollInterval)
	if own == planted {
		t.Errorf("the dispatcher reads the planted consumer %s", planted)
	}
	submit(t, ctx, itest.ShellJob(v, "victim", "true"))
	waitTerminal(t, ctx, v, "victim")
	testutil.Eventually(t, itest.Left(ctx), "v's phase events forwarded by its rule", func() bool {
		data, err := env.events.LastMsg(ctx, notify.NotifyStream, "dlc."+v+".notify.fwd")
		return err == nil && strings.Contains(string(data), `"victim"`)
	}, itest.PollInterval)
	if _, err := env.events.JetStream().Consumer(ctx, jetstream.EventsStream, planted); err == nil {
		t.Errorf("a consumer named %s exists", planted)
	}
}

// A viewer's consumers (issue 33, findings 7 and 8): durable ones are refused, so are
// push consumers delivering into another workspace's subjects and more than
// jetstream.MaxReaderConsumers consumers of the workspace on a stream; nothing of them
// exists afterwards and the other workspace's subjects got nothing. The viewer's
// ephemeral consumers and ordered reads work (dlc event tail -f and dlc job logs -f
// read through the API; TestNATSLockedDown reads as a reader too).
func TestNATSReaderConsumersBounded(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	a, b := "natsbound-a", "natsbound-b"
	for _, ws := range []string{a, b} {
		ensureWorkspace(t, ctx, ws)
	}
	spy, err := nats.Connect(env.e.Stack.NATS.URL, env.e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	intoB, err := spy.SubscribeSync("dlc." + b + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	reader, _ := natsReader(t, ctx, a, api.RoleViewer)
	gated, err := natsjs.NewWithAPIPrefix(reader, jetstream.ReaderAPIPrefix(a))
	if err != nil {
		t.Fatal(err)
	}
	filter := "dlc." + a + ".>"
	for what, cfg := range map[string]natsjs.ConsumerConfig{
		"a durable consumer":     {Durable: "mine", FilterSubject: filter},
		"a push consumer into b": {DeliverSubject: "dlc." + b + ".job.x.status", FilterSubject: filter},
	} {
		if _, err := gated.CreateConsumer(ctx, jetstream.EventsStream, cfg); err == nil || !strings.Contains(err.Error(), "opendlc:") {
			t.Errorf("%s: %v, want the gate's refusal", what, err)
		}
	}
	submit(t, ctx, itest.ShellJob(a, "seen", "true"))
	waitTerminal(t, ctx, a, "seen")
	rc, err := jetstream.NewReader(reader, a)
	if err != nil {
		t.Fatal(err)
	}
	_, phases := streamEvents[events.JobPhaseData](t, ctx, rc, events.JobStatusSubject(a, "seen"))
	if len(phases) == 0 {
		t.Error("the viewer's ordered read got no phase")
	}
	s, err := env.events.JetStream().Stream(ctx, jetstream.LogsStream)
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for ; created <= jetstream.MaxReaderConsumers; created++ {
		if _, err := gated.CreateConsumer(ctx, jetstream.LogsStream, natsjs.ConsumerConfig{
			FilterSubject: "dlc." + a + ".job.seen.logs.>", AckPolicy: natsjs.AckNonePolicy, InactiveThreshold: time.Minute}); err != nil {
			if !strings.Contains(err.Error(), "opendlc:") {
				t.Fatalf("consumer %d: %v", created+1, err)
			}
			break
		}
	}
	if created != jetstream.MaxReaderConsumers {
		t.Errorf("the viewer created %d consumers on %s, want %d", created, jetstream.LogsStream, jetstream.MaxReaderConsumers)
	}
	for info := range s.ListConsumers(ctx).Info() {
		if info.Config.Durable != "" && strings.HasPrefix(info.Config.FilterSubject, "dlc."+a+".") {
			t.Errorf("durable consumer %s of %s exists", info.Name, a)
		}
	}
	if m, err := intoB.NextMsg(time.Second); err == nil {
		t.Errorf("b's subjects got %s", m.Subject)
	}
}

// A viewer's NATS login gets its workspace's events live but never its audit records
// (dlc.<ws>.audit): a subscription on the workspace is not delivered them and one on
// the audit subject is refused by the server (issue 33, finding 8).
func TestNATSReaderGetsNoAudit(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := "natsaudit"
	ensureWorkspace(t, ctx, ws)
	reader, violations := natsReader(t, ctx, ws, api.RoleViewer)
	all, err := reader.SubscribeSync("dlc." + ws + ".>")
	if err != nil {
		t.Fatal(err)
	}
	audit := events.AuditSubject(ws)
	byName, err := reader.SubscribeSync(audit)
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}
	waitViolation(t, violations, audit)
	// A submission is audited on dlc.<ws>.audit and runs a job whose status the reader
	// gets.
	submit(t, ctx, itest.ShellJob(ws, "audited", "true"))
	waitTerminal(t, ctx, ws, "audited")
	testutil.Eventually(t, itest.Left(ctx), "the submission's audit record stored", func() bool {
		data, err := env.events.LastMsg(ctx, jetstream.AuditStream, audit)
		return err == nil && strings.Contains(string(data), "audited")
	}, itest.PollInterval)
	var subjects []string
	for {
		m, err := all.NextMsg(2 * time.Second)
		if err != nil {
			break
		}
		subjects = append(subjects, m.Subject)
	}
	if len(subjects) == 0 {
		t.Error("the reader got none of the workspace's events")
	}
	for _, s := range subjects {
		if s == audit {
			t.Errorf("the reader got an audit record on %s", s)
		}
	}
	if m, err := byName.NextMsg(time.Second); err == nil {
		t.Errorf("the subscription on %s got a message", m.Subject)
	}
}

// A viewer may not start jobs through a trigger: its publish on the trigger subject is
// refused by the server and starts nothing; a member's publish starts the trigger's job
// (issue 33, finding 8).
func TestNATSTriggerPublishNeedsWrite(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := "natstrigger"
	ensureWorkspace(t, ctx, ws)
	if _, err := env.api.ApplyTrigger(ctx, triggerDoc(ws, "go")); err != nil {
		t.Fatal(err)
	}
	subject := "dlc." + ws + ".trigger.go"
	viewer, violations := natsReader(t, ctx, ws, api.RoleViewer)
	if err := viewer.Publish(subject, dataReady("from-viewer", "k", 0)); err != nil {
		t.Fatal(err)
	}
	_ = viewer.Flush()
	waitViolation(t, violations, subject)
	// The member's event comes after the viewer's: once the member's job exists and the
	// inbound stream is drained, a job of the viewer's event would exist too.
	member, _ := natsReader(t, ctx, ws, api.RoleMember)
	if err := member.Publish(subject, dataReady("from-member", "k", 0)); err != nil {
		t.Fatal(err)
	}
	if err := member.Flush(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "the member's trigger event starts a job", func() bool {
		l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{})
		return err == nil && len(l.Items) >= 1
	}, itest.PollInterval)
	inboundDrained(t, ctx)
	if l, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{}); err != nil {
		t.Fatal(err)
	} else if len(l.Items) != 1 {
		t.Fatalf("%d jobs after the viewer's and the member's trigger events, want the member's one", len(l.Items))
	}
}

// An upload into workspace b's storage location (DefaultStorageRoot/<b>/) is announced
// on b's S3 subject only: the fallback workspace's viewer (s3Workspace, which got every
// bucket's notifications before) receives nothing of it, and an upload outside every
// workspace's location still goes to the fallback workspace (issue 33, finding 8).
func TestS3NotificationsGoToTheOwningWorkspace(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := "s3route-b"
	ensureWorkspace(t, ctx, b)
	ensureWorkspace(t, ctx, s3Workspace)
	fallback, _ := natsReader(t, ctx, s3Workspace, api.RoleViewer)
	seenByFallback, err := fallback.SubscribeSync(schemas.S3EventSubject(s3Workspace))
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := natsReader(t, ctx, b, api.RoleViewer)
	seenByOwner, err := owner.SubscribeSync(schemas.S3EventSubject(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{fallback, owner} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	loc, err := storage.DefaultLocation(embedded.DefaultStorageRoot, b)
	if err != nil {
		t.Fatal(err)
	}
	secretKey := loc.Prefix + "secret-" + strconv.FormatInt(time.Now().UnixNano(), 10) + ".csv"
	const unowned = "trigger-datasets"
	if err := env.e.Stack.S3.CreateBuckets(ctx, unowned); err != nil {
		t.Fatal(err)
	}
	publicKey := "route-" + strconv.FormatInt(time.Now().UnixNano(), 10) + ".csv"
	s3c := env.e.Stack.S3.Client()
	for bucket, key := range map[string]string{loc.Bucket: secretKey, unowned: publicKey} {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: bytes.NewReader([]byte("a,b\n"))}); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(sub *nats.Subscription, key string) []string {
		var got []string
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			m, err := sub.NextMsg(time.Until(deadline))
			if err != nil {
				break
			}
			got = append(got, string(m.Data))
			if strings.Contains(string(m.Data), key) {
				break
			}
		}
		return got
	}
	if got := wait(seenByOwner, secretKey); len(got) == 0 || !strings.Contains(got[len(got)-1], secretKey) {
		t.Errorf("b's viewer did not get the notification of %s: %q", secretKey, got)
	}
	got := wait(seenByFallback, publicKey)
	if len(got) == 0 || !strings.Contains(got[len(got)-1], publicKey) {
		t.Errorf("the fallback workspace's viewer did not get the notification of %s/%s: %q", unowned, publicKey, got)
	}
	// Stragglers: b's upload may have been announced after the other one.
	for m, err := seenByFallback.NextMsg(2 * time.Second); err == nil; m, err = seenByFallback.NextMsg(time.Second) {
		got = append(got, string(m.Data))
	}
	for _, m := range got {
		if strings.Contains(m, secretKey) {
			t.Errorf("the fallback workspace's viewer got b's upload: %s", m)
		}
	}
}
