package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
)

// hookRequest is one request a test webhook received.
type hookRequest struct {
	uri    string
	header http.Header
	body   []byte
}

// hookServer is a webhook receiver on 127.0.0.1 that answers with status and body.
type hookServer struct {
	srv    *httptest.Server
	status atomic.Int32
	answer string
	mu     sync.Mutex
	reqs   []hookRequest
}

func newHookServer(t *testing.T, status int, answer string) *hookServer {
	h := &hookServer{answer: answer}
	h.status.Store(int32(status))
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.reqs = append(h.reqs, hookRequest{uri: r.URL.RequestURI(), header: r.Header.Clone(), body: body})
		h.mu.Unlock()
		w.WriteHeader(int(h.status.Load()))
		_, _ = io.WriteString(w, h.answer)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookServer) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.reqs...)
}

// mailSink is a real SMTP server (github.com/emersion/go-smtp) on 127.0.0.1 that keeps
// every message it accepts.
type mailSink struct {
	port int
	mu   sync.Mutex
	msgs [][]byte
	rcpt [][]string
}

type mailSession struct {
	sink *mailSink
	rcpt []string
}

func (s *mailSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rcpt = append(s.rcpt, to)
	return nil
}
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.sink.mu.Lock()
	s.sink.msgs = append(s.sink.msgs, b)
	s.sink.rcpt = append(s.sink.rcpt, s.rcpt)
	s.sink.mu.Unlock()
	return nil
}
func (s *mailSession) Reset()        { s.rcpt = nil }
func (s *mailSession) Logout() error { return nil }

func newMailSink(t *testing.T) *mailSink {
	t.Helper()
	sink := &mailSink{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &mailSession{sink: sink}, nil }))
	srv.Domain = "127.0.0.1"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.port = l.Addr().(*net.TCPAddr).Port
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sink
}

func (s *mailSink) messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.msgs...)
}

// Notification rules applied through the API, on the real stack: a failed job's phase
// event reaches a Slack-compatible webhook, a DingTalk robot and a Feishu bot (each
// signed the way the platform checks), a WeCom robot and a user template as
// human-readable messages that link to the console, and an SMTP server as an e-mail; the rules match on the job's reason, and a job that succeeds
// sends nothing. The DingTalk bot secret reads back redacted.
func TestChatFormatsAndEmailOnRealStack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	const secret, botSecret = "0123456789abcdef0123456789abcdef", "SECding-bot-secret"
	slack := newHookServer(t, http.StatusOK, "ok")
	ding := newHookServer(t, http.StatusOK, `{"errcode":0,"errmsg":"ok"}`)
	lark := newHookServer(t, http.StatusOK, `{"code":0,"msg":"success"}`)
	wecom := newHookServer(t, http.StatusOK, `{"errcode":0,"errmsg":"ok"}`)
	tmpl := newHookServer(t, http.StatusOK, "ok")
	sink := newMailSink(t)
	rules := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: chat, workspace: %[1]s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Failed], reasons: [ReplicaFailed]}
  webhook: {url: %[2]q, secret: %[4]q, format: slack}
---
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: ding, workspace: %[1]s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Failed], jobs: [bad]}
  webhook: {url: %[3]q, secret: %[4]q, format: dingtalk, botSecret: %[5]q}
---
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: lark, workspace: %[1]s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Failed], jobs: [bad]}
  webhook: {url: %[7]q, secret: %[4]q, format: feishu, botSecret: %[5]q}
---
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: wecom, workspace: %[1]s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Failed], jobs: [bad]}
  webhook: {url: %[8]q, secret: %[4]q, format: wecom}
---
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: tmpl, workspace: %[1]s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Failed], jobs: [bad]}
  webhook:
    url: %[9]q
    secret: %[4]q
    format: template
    template: {contentType: application/json, body: '{"summary": {{json .Title}}, "job": {{json (index .Event "data" "job")}}, "link": {{json .Link}}}'}
---
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: mail, workspace: %[1]s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Failed]}
  email:
    to: ["Oncall <oncall@example.com>"]
    from: dlc@example.com
    smtp: {host: 127.0.0.1, port: %[6]d, tls: none}
`, ws, slack.srv.URL+"/slack", ding.srv.URL+"/robot/send?access_token=tok", secret, botSecret, sink.port,
		lark.srv.URL+"/open-apis/bot/v2/hook/x", wecom.srv.URL+"/cgi-bin/webhook/send?key=k", tmpl.srv.URL+"/events")
	for doc := range strings.SplitSeq(rules, "---\n") {
		r, err := env.api.ApplyRule(ctx, []byte(doc))
		if err != nil {
			t.Fatalf("apply rule: %v", err)
		}
		if r.Spec.Webhook != nil && r.Spec.Webhook.BotSecret == botSecret {
			t.Errorf("rule %s: the API returned the bot secret", r.Metadata.Name)
		}
	}
	for _, job := range []struct{ name, cmd string }{{"ok", "true"}, {"bad", "exit 7"}} {
		submit(t, ctx, itest.ShellJob(ws, job.name, job.cmd))
		waitTerminal(t, ctx, ws, job.name)
	}
	hooks := map[string]*hookServer{"slack": slack, "dingtalk": ding, "feishu": lark, "wecom": wecom, "template": tmpl}
	testutil.Eventually(t, itest.Left(ctx), "a delivery to every webhook and an e-mail", func() error {
		for name, h := range hooks {
			if len(h.requests()) < 1 {
				return fmt.Errorf("nothing on %s yet", name)
			}
		}
		if len(sink.messages()) < 1 {
			return errors.New("no e-mail yet")
		}
		return nil
	}, itest.PollInterval)
	for name, h := range hooks {
		if r := h.requests()[0]; !notify.VerifySignature([]byte(secret), r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("%s: X-OpenDLC-Signature does not verify", name)
		}
	}

	title := "Job bad Failed: ReplicaFailed"
	link := "https://console.test.invalid/ui/ws/" + ws + "/jobs/bad"
	s := slack.requests()[0]
	if !notify.VerifySignature([]byte(secret), s.body, s.header.Get(notify.HeaderSignature)) {
		t.Error("slack: X-OpenDLC-Signature does not verify")
	}
	var sb struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type string `json:"type"`
			Text struct{ Type, Text string }
		} `json:"blocks"`
	}
	if err := json.Unmarshal(s.body, &sb); err != nil || len(sb.Blocks) != 1 || sb.Blocks[0].Type != "section" || sb.Blocks[0].Text.Type != "mrkdwn" {
		t.Fatalf("slack body %s: %v", s.body, err)
	}
	for _, want := range []string{"*" + title + "*", "*Workspace:* " + ws, "<" + link + "|Open in the console>"} {
		if !strings.Contains(sb.Text, want) {
			t.Errorf("slack text %q lacks %q", sb.Text, want)
		}
	}

	d := ding.requests()[0]
	var db struct {
		MsgType  string `json:"msgtype"`
		Markdown struct{ Title, Text string }
	}
	if err := json.Unmarshal(d.body, &db); err != nil || db.MsgType != "markdown" || db.Markdown.Title != title ||
		!strings.Contains(db.Markdown.Text, "("+link+")") {
		t.Errorf("dingtalk body %s: %v", d.body, err)
	}
	u, _ := http.NewRequest(http.MethodGet, d.uri, nil)
	q := u.URL.Query()
	mac := hmac.New(sha256.New, []byte(botSecret))
	mac.Write([]byte(q.Get("timestamp") + "\n" + botSecret))
	ms, _ := strconv.ParseInt(q.Get("timestamp"), 10, 64)
	if q.Get("sign") != base64.StdEncoding.EncodeToString(mac.Sum(nil)) || time.Since(time.UnixMilli(ms)).Abs() > time.Hour ||
		q.Get("access_token") != "tok" {
		t.Errorf("dingtalk request %s: the signature does not verify as DingTalk checks it", d.uri)
	}

	var lb struct {
		Card struct {
			Header struct{ Title struct{ Content string } }
		} `json:"card"`
	}
	lr := lark.requests()[0]
	var lm map[string]any
	if err := json.Unmarshal(lr.body, &lm); err != nil || json.Unmarshal(lr.body, &lb) != nil {
		t.Fatalf("feishu body %s: %v", lr.body, err)
	}
	ts, _ := lm["timestamp"].(string)
	lmac := hmac.New(sha256.New, []byte(ts+"\n"+botSecret))
	sec, _ := strconv.ParseInt(ts, 10, 64)
	if lm["msg_type"] != "interactive" || lb.Card.Header.Title.Content != title || lm["sign"] != base64.StdEncoding.EncodeToString(lmac.Sum(nil)) ||
		time.Since(time.Unix(sec, 0)).Abs() > time.Hour {
		t.Errorf("feishu body %s: not an interactive card signed as Feishu checks it", lr.body)
	}
	var wb struct {
		MsgType  string `json:"msgtype"`
		Markdown struct{ Content string }
	}
	if err := json.Unmarshal(wecom.requests()[0].body, &wb); err != nil || wb.MsgType != "markdown" || !strings.Contains(wb.Markdown.Content, title) {
		t.Errorf("wecom body %s: %v", wecom.requests()[0].body, err)
	}
	var tb map[string]string
	if err := json.Unmarshal(tmpl.requests()[0].body, &tb); err != nil || tb["summary"] != title || tb["job"] != "bad" || tb["link"] != link {
		t.Errorf("template body %s: %v", tmpl.requests()[0].body, err)
	}

	msg, err := mail.ReadMessage(strings.NewReader(string(sink.messages()[0])))
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if subject != "[OpenDLC] "+title || msg.Header.Get("To") != `"Oncall" <oncall@example.com>` ||
		!strings.Contains(string(body), "workspace: "+ws) || !strings.Contains(string(body), "link: "+link) {
		t.Errorf("e-mail: subject %q, to %q, body %q", subject, msg.Header.Get("To"), body)
	}
	// The succeeded job matched none of the rules: nothing more arrives.
	testutil.Consistently(t, 2*time.Second, "one message per target", func() error {
		for name, h := range hooks {
			if n := len(h.requests()); n != 1 {
				return fmt.Errorf("%d requests on %s", n, name)
			}
		}
		if n := len(sink.messages()); n != 1 {
			return fmt.Errorf("%d e-mails", n)
		}
		return nil
	})
}

// A delivery dead-lettered on the real stack is sent again by `dlc rule redrive` once
// the receiver works, signed as any delivery; a second redrive sends nothing.
func TestRuleRedriveOnRealStack(t *testing.T) {
	t.Parallel()
	if _, err := buildDLC(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	ws := workspace(t)
	const secret = "0123456789abcdef0123456789abcdef"
	hook := newHookServer(t, http.StatusServiceUnavailable, "down")
	if _, err := env.api.ApplyRule(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: hook, workspace: %s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Succeeded]}
  webhook: {url: %q, secret: %q}
  delivery: {maxAttempts: 2, backoff: {initial: 10ms, max: 10ms}}
`, ws, hook.srv.URL, secret)); err != nil {
		t.Fatal(err)
	}
	runJob(t, ctx, ws, "ok", `
  framework: custom
  command: [sh, -c, "true"]
  roles: {worker: {replicas: 1}}
`)
	var dl notify.DeadLetter
	testutil.Eventually(t, itest.Left(ctx), "the dead letter", func() bool {
		data, err := env.events.LastMsg(ctx, jetstream.NotifyStream, "dlc."+ws+".notify.deadletter")
		return err == nil && data != nil && json.Unmarshal(data, &dl) == nil
	}, itest.PollInterval)
	if dl.Rule != "hook" || dl.Status != http.StatusServiceUnavailable || len(hook.requests()) != 2 {
		t.Fatalf("dead letter %+v after %d requests", dl, len(hook.requests()))
	}

	hook.status.Store(http.StatusOK)
	dlc := dlcRunner(t, ctx, ws)
	out, err := dlc("rule", "redrive", "hook")
	if err != nil || !strings.Contains(out, "rule hook: 1 dead letters queued, 0 queued before") {
		t.Fatalf("dlc rule redrive: %q %v", out, err)
	}
	testutil.Eventually(t, itest.Left(ctx), "the redriven delivery", func() bool { return len(hook.requests()) == 3 }, itest.PollInterval)
	r := hook.requests()[2]
	if r.header.Get(notify.HeaderEventID) != dl.EventID || !notify.VerifySignature([]byte(secret), r.body, r.header.Get(notify.HeaderSignature)) ||
		string(r.body) != string(dl.Event) {
		t.Errorf("redriven request: event %q (want %q), body %s", r.header.Get(notify.HeaderEventID), dl.EventID, r.body)
	}
	out, err = dlc("rule", "redrive", "hook", "--since", "1h")
	if err != nil || !strings.Contains(out, "rule hook: 0 dead letters queued, 1 queued before") {
		t.Fatalf("second dlc rule redrive: %q %v", out, err)
	}
	if _, err := dlc("rule", "redrive", "nope"); err == nil {
		t.Error("redrive of an unknown rule succeeded")
	}
	testutil.Consistently(t, 2*time.Second, "no second redelivery", func() error {
		if n := len(hook.requests()); n != 3 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	_ = env.api.DeleteRule(context.Background(), ws, "hook")
}
