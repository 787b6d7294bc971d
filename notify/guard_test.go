package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// TestRefusedReason: every internal class of address is refused, with its reason, and
// public addresses are not.
func TestRefusedReason(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1":        "loopback",
		"127.1.2.3":        "loopback",
		"::1":              "loopback",
		"::ffff:127.0.0.1": "loopback",
		"10.1.2.3":         "private",
		"172.16.0.1":       "private",
		"192.168.1.1":      "private",
		"fc00::1":          "private",
		"fd12:3456::1":     "private",
		"169.254.169.254":  "link-local",
		"169.254.0.1":      "link-local",
		"fe80::1":          "link-local",
		"224.0.0.1":        "multicast",
		"239.255.255.250":  "multicast",
		"ff02::1":          "multicast",
		"0.0.0.0":          "unspecified",
		"::":               "unspecified",
		"0.1.2.3":          `"this network"`,
		"100.64.0.1":       "shared address space (carrier-grade NAT)",
		"255.255.255.255":  "reserved (and broadcast)",
		"64:ff9b::7f00:1":  "NAT64 (an IPv4 address behind it)",
		"8.8.8.8":          "",
		"93.184.216.34":    "",
		"2606:4700::1111":  "",
	} {
		if got := notify.RefusedReason(netip.MustParseAddr(addr)); got != want {
			t.Errorf("RefusedReason(%s) = %q, want %q", addr, got, want)
		}
	}
}

// TestParseAllowList: CIDRs, addresses and host:port pairs are accepted; anything else
// is refused with the entry named.
func TestParseAllowList(t *testing.T) {
	t.Parallel()
	if _, err := notify.ParseAllowList([]string{"10.0.0.0/8", "fd00::/8", "127.0.0.1", "hooks.internal:8443", "[::1]:9000", " "}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"hooks.internal", "10.0.0.0/33", ":80", "host:"} {
		_, err := notify.ParseAllowList([]string{bad})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("ParseAllowList(%q) = %v, want an error naming the entry", bad, err)
		}
	}
}

// deadLetters waits until ws's dead-letter subject holds n letters and returns them
// decoded, with their raw bytes.
func deadLetters(e *env, ws string, n int) ([]notify.DeadLetter, [][]byte) {
	e.t.Helper()
	subject := "dlc." + ws + ".notify.deadletter"
	var msgs []*jetstream.RawStreamMsg
	testutil.Eventually(e.t, notifyWait, fmt.Sprintf("%d dead letters on %s", n, subject), func() bool {
		msgs = e.notifyMsgs(subject)
		return len(msgs) >= n
	})
	var out []notify.DeadLetter
	var raw [][]byte
	for _, m := range msgs {
		var dl notify.DeadLetter
		if err := json.Unmarshal(m.Data, &dl); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, dl)
		raw = append(raw, m.Data)
	}
	return out, raw
}

// oneAttempt makes a rule dead-letter after its first failure.
func oneAttempt(r *schemas.NotificationRule) { r.Spec.Delivery.MaxAttempts = 1 }

// closeDispatcher closes d and waits for it.
func closeDispatcher(t *testing.T, d *notify.Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWebhookToLoopbackRefusedThenAllowed: a webhook on 127.0.0.1 is refused at dial
// time by a dispatcher without an allow-list (the dead letter names the address and
// the receiver sees nothing), and delivered by one whose allow-list names it.
func TestWebhookToLoopbackRefusedThenAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	d := e.start(notify.WithWebhookAllowList()) // the default: nothing internal allowed
	e.put(d, webhookRule("a", "local", rc.url(), oneAttempt))
	p1 := e.phase("a", "j", 1, schemas.JobRunning, nil)
	letters, _ := deadLetters(e, "a", 1)
	e.waitProcessed("a")
	dl := letters[0]
	t.Logf("refused: %s", dl.Error)
	if dl.EventID != p1.id || dl.Status != 0 || !strings.Contains(dl.Error, notify.ErrDestinationRefused.Error()) ||
		!strings.Contains(dl.Error, "127.0.0.1 is loopback") {
		t.Errorf("dead letter %+v: want event %s, no status, and an error naming 127.0.0.1 as loopback", dl, p1.id)
	}
	if n := len(rc.all()); n != 0 {
		t.Fatalf("the receiver got %d requests; the dialer should have refused to connect", n)
	}
	closeDispatcher(t, d)

	e.start(notify.WithWebhookAllowList("127.0.0.0/8"))
	p2 := e.phase("a", "j", 2, schemas.JobSucceeded, nil)
	rc.waitDelivered(1)
	wantEqual(t, "delivered with the allow-list", []string{p2.id}, rc.delivered())
}

// TestWebhookHostnameResolvingToLoopbackRefused: a name that resolves to loopback
// ("localhost") is refused as surely as the literal address, because the check runs on
// the address the dialer connects to; a host:port entry of the allow-list naming it as
// the URL writes it lets it through.
func TestWebhookHostnameResolvingToLoopbackRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, ok)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(rc.srv.URL, "http://"))
	url := "http://localhost:" + port + "/hook"
	d := e.start(notify.WithWebhookAllowList())
	e.put(d, webhookRule("a", "byname", url, oneAttempt))
	e.phase("a", "j", 1, schemas.JobRunning, nil)
	letters, _ := deadLetters(e, "a", 1)
	e.waitProcessed("a")
	t.Logf("refused: %s", letters[0].Error)
	if !strings.Contains(letters[0].Error, notify.ErrDestinationRefused.Error()) || !strings.Contains(letters[0].Error, "is loopback") {
		t.Errorf("dead letter error %q: want the loopback refusal", letters[0].Error)
	}
	if n := len(rc.all()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
	closeDispatcher(t, d)

	e.start(notify.WithWebhookAllowList("localhost:" + port))
	p2 := e.phase("a", "j", 2, schemas.JobSucceeded, nil)
	rc.waitDelivered(1)
	wantEqual(t, "delivered with localhost:port allowed", []string{p2.id}, rc.delivered())
}

// TestWebhookRedirectNotFollowed: a 3xx answer is a failed delivery: the dead letter
// keeps the status, and the redirect's target is never requested, although the
// allow-list would let the dispatcher reach it.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	target := newReceiver(t, ok)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.url(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	d := e.start()
	e.put(d, webhookRule("a", "redirect", redirector.URL+"/hook", oneAttempt))
	p := e.phase("a", "j", 1, schemas.JobRunning, nil)
	letters, _ := deadLetters(e, "a", 1)
	e.waitProcessed("a")
	dl := letters[0]
	if dl.EventID != p.id || dl.Status != http.StatusTemporaryRedirect || dl.Error != "HTTP 307 Temporary Redirect" {
		t.Errorf("dead letter %+v: want status 307 and error %q", dl, "HTTP 307 Temporary Redirect")
	}
	if n := len(target.all()); n != 0 {
		t.Errorf("the redirect's target got %d requests, want 0", n)
	}
}

// TestDeadLetterHoldsNoResponseBody: what a failing endpoint answers never reaches the
// dead letter (which the workspace reads); its status does.
func TestDeadLetterHoldsNoResponseBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const secret = "INTERNAL-METADATA-TOKEN-a1b2c3"
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.Header().Set("X-Leak", secret)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, secret+"\n"+strings.Repeat("x", 1000))
	}))
	t.Cleanup(srv.Close)
	d := e.start()
	e.put(d, webhookRule("a", "leaky", srv.URL+"/hook", func(r *schemas.NotificationRule) { r.Spec.Delivery.MaxAttempts = 2 }))
	e.phase("a", "j", 1, schemas.JobFailed, nil)
	letters, raw := deadLetters(e, "a", 1)
	e.waitProcessed("a")
	dl := letters[0]
	if hits.Load() != 2 {
		t.Errorf("the endpoint was asked %d times, want 2 attempts", hits.Load())
	}
	if dl.Status != http.StatusInternalServerError || dl.Error != "HTTP 500 Internal Server Error" || dl.Attempts != 2 {
		t.Errorf("dead letter status %d, error %q, attempts %d: want 500, %q, 2", dl.Status, dl.Error, dl.Attempts, "HTTP 500 Internal Server Error")
	}
	if strings.Contains(string(raw[0]), secret) || strings.Contains(string(raw[0]), "xxxx") {
		t.Errorf("the dead letter carries the response body: %s", raw[0])
	}
}

// TestDeadLetterHidesTheResolver: a webhook whose host does not resolve is
// dead-lettered naming the host, without the address of the resolver that answered
// (issue 33, finding 9: "lookup x on 10.255.255.53:53" showed the platform's
// resolver to the workspace).
func TestDeadLetterHidesTheResolver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.start()
	e.put(d, webhookRule("a", "nowhere", "http://nosuch-host.invalid/hook", oneAttempt))
	e.phase("a", "j", 1, schemas.JobRunning, nil)
	letters, raw := deadLetters(e, "a", 1)
	e.waitProcessed("a")
	t.Logf("dead letter error: %s", letters[0].Error)
	if !strings.Contains(letters[0].Error, "nosuch-host.invalid") {
		t.Errorf("dead letter error %q: want it to name the host", letters[0].Error)
	}
	resolv, _ := os.ReadFile("/etc/resolv.conf")
	for line := range strings.Lines(string(resolv)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" && strings.Contains(string(raw[0]), f[1]) {
			t.Errorf("the dead letter shows the resolver %s: %s", f[1], raw[0])
		}
	}
	if strings.Contains(letters[0].Error, ":53") {
		t.Errorf("the dead letter error shows a resolver's port: %q", letters[0].Error)
	}
}
