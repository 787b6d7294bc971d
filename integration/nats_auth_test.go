package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// The stack's NATS refuses anonymous clients and tokens that may not read the
// workspace they name; a workspace reader logs in with its API token and reads its
// job's events and logs, live and from the streams; it is refused b's events, b's
// consumer list and the deletion of b's notification consumer, which keeps
// forwarding b's events.
func TestNATSLockedDown(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	srv := env.e.Stack.NATS
	if nc, err := nats.Connect(srv.URL); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to the stack's NATS")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("anonymous client: %v, want an authorization violation", err)
	}
	fi, err := os.Stat(filepath.Join(env.e.Dir, "nats", devstack.NATSUsersFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the stack's NATS passwords file: %v, %v; want mode 0600", fi, err)
	}

	a, b := "natsauth-a", "natsauth-b"
	tokens := map[string]string{}
	for _, ws := range []string{a, b} {
		ensureWorkspace(t, ctx, ws)
		tok, err := env.api.CreateToken(ctx, api.TokenRequest{Name: "reader-" + ws, Workspace: ws, Role: api.RoleViewer,
			TTL: schemas.Duration(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		tokens[ws] = tok.Secret
		t.Cleanup(func() { _ = env.api.RevokeToken(context.Background(), "reader-"+ws) })
	}
	revoked, err := env.api.CreateToken(ctx, api.TokenRequest{Name: "reader-revoked", Workspace: a, Role: api.RoleViewer, TTL: schemas.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.api.RevokeToken(ctx, "reader-revoked"); err != nil {
		t.Fatal(err)
	}
	for what, login := range map[string][2]string{
		"b's token as a reader of a": {a, tokens[b]},
		"a's token as a reader of b": {b, tokens[a]},
		"a revoked token":            {a, revoked.Secret},
		"a wildcard workspace":       {"*", env.e.AdminToken},
		"a malformed token":          {a, "not-a-token"},
	} {
		if nc, err := nats.Connect(srv.URL, nats.UserInfo(login[0], login[1])); err == nil {
			nc.Close()
			t.Errorf("%s connected", what)
		}
	}

	// b has a rule: the notification dispatcher holds a durable consumer of b.
	if _, err := env.api.ApplyRule(ctx, ruleDoc(b, "fwd")); err != nil {
		t.Fatal(err)
	}
	var durable string
	testutil.Eventually(t, itest.Left(ctx), "b's notification consumer", func() bool {
		durable, err = notify.ConsumerNameOf(ctx, env.events.JetStream(), notify.DefaultConsumerPrefix, b)
		return err == nil && durable != ""
	}, itest.PollInterval)

	violations := make(chan error, 32)
	reader, err := nats.Connect(srv.URL, nats.UserInfo(a, tokens[a]), nats.CustomInboxPrefix(jetstream.InboxPrefix(a)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatalf("a's reader with its token: %v", err)
	}
	defer reader.Close()
	live, err := reader.SubscribeSync(events.JobStatusSubject(a, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}
	submit(t, ctx, itest.ShellJob(a, "hello", "echo hello-from-a"))
	if j := waitTerminal(t, ctx, a, "hello"); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job phase %s: %s", j.Status.Phase, j.Status.Message)
	}
	if _, err := live.NextMsg(10 * time.Second); err != nil {
		t.Errorf("a's reader got no live status event: %v", err)
	}
	rc, err := jetstream.NewReader(reader, a)
	if err != nil {
		t.Fatal(err)
	}
	_, phases := streamEvents[events.JobPhaseData](t, ctx, rc, events.JobStatusSubject(a, "hello"))
	if got := phasesOf(phases); len(got) == 0 || got[len(got)-1] != string(schemas.JobSucceeded) {
		t.Errorf("a's reader read phases %v, want them to end in Succeeded", got)
	}
	var logs []string
	if err := rc.ReadUntil(ctx, jetstream.LogsStream, events.JobLogsFilter(a, "hello"), nil, func(_ string, data []byte) error {
		logs = append(logs, string(data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(logs, "\n"), "hello-from-a") {
		t.Errorf("a's reader read logs %q, want hello-from-a", logs)
	}

	// b's events, consumer list and notification consumer are out of reach.
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rc.ReadUntil(short, jetstream.EventsStream, "dlc."+b+".>", nil, func(string, []byte) error { return nil }); err == nil {
		t.Error("a's reader read b's events")
	}
	for _, subject := range []string{"$JS.API.CONSUMER.NAMES." + jetstream.EventsStream, "$JS.API.CONSUMER.DELETE." + jetstream.EventsStream + "." + durable} {
		if resp, err := reader.Request(subject, nil, 2*time.Second); err == nil {
			t.Errorf("%s answered %s", subject, resp.Data)
		}
		waitViolation(t, violations, subject)
	}
	if _, err := env.events.JetStream().Consumer(ctx, jetstream.EventsStream, durable); err != nil {
		t.Fatalf("b's notification consumer after a's attempts: %v", err)
	}
	submit(t, ctx, itest.ShellJob(b, "after", "true"))
	waitTerminal(t, ctx, b, "after")
	testutil.Eventually(t, itest.Left(ctx), "b's phase events forwarded by its rule", func() bool {
		data, err := env.events.LastMsg(ctx, notify.NotifyStream, "dlc."+b+".notify.fwd")
		return err == nil && strings.Contains(string(data), `"after"`)
	}, itest.PollInterval)
}

// waitViolation waits for the server's permissions violation naming subject.
func waitViolation(t *testing.T, violations chan error, subject string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-violations:
			if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				if strings.Contains(err.Error(), subject) {
					return
				}
			}
		case <-timeout:
			t.Errorf("no permissions violation for %s", subject)
			return
		}
	}
}

// `dlc up --nats-tls` serves NATS over TLS only, with the CA it generated into its
// state directory: anonymous clients and clients that do not trust the CA are refused;
// the stack's server identity (from users.json) and a reader logging in with the admin
// token connect over TLS.
func TestDlcUpNATSOverTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := dlcBinary(t)
	state := filepath.Join(dir, "state")
	text := itest.StartDlcUp(t, ctx, bin, "--dir", state, "--addr", freeAddr(t), "--ui=false", "--workdir", dir, "--nats-tls").Banner
	m := regexp.MustCompile(`NATS +(tls://\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("banner has no tls:// NATS URL:\n%s", text)
	}
	url, ca := m[1], filepath.Join(state, "nats", "tls", "ca.pem")
	if !strings.Contains(text, ca) {
		t.Errorf("banner does not name the CA %s:\n%s", ca, text)
	}
	if nc, err := nats.Connect(url, nats.RootCAs(ca)); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected")
	}
	b, err := os.ReadFile(filepath.Join(state, "nats", devstack.NATSUsersFile))
	if err != nil {
		t.Fatal(err)
	}
	var users struct{ Passwords map[string]string }
	if err := json.Unmarshal(b, &users); err != nil {
		t.Fatal(err)
	}
	login := nats.UserInfo(devstack.NATSUserServer, users.Passwords[devstack.NATSUserServer])
	if nc, err := nats.Connect(url, login); err == nil {
		nc.Close()
		t.Fatal("a client that does not trust the CA connected")
	}
	nc, err := nats.Connect(url, login, nats.RootCAs(ca))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Errorf("the server's connection is not TLS: %v", err)
	}
	admin, err := os.ReadFile(filepath.Join(state, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	reader, err := nats.Connect(url, nats.UserInfo(schemas.DefaultWorkspace, strings.TrimSpace(string(admin))), nats.RootCAs(ca),
		nats.CustomInboxPrefix(jetstream.InboxPrefix(schemas.DefaultWorkspace)))
	if err != nil {
		t.Fatalf("a reader of %s with the admin token: %v", schemas.DefaultWorkspace, err)
	}
	defer reader.Close()
	if _, err := reader.TLSConnectionState(); err != nil {
		t.Errorf("the reader's connection is not TLS: %v", err)
	}
}
