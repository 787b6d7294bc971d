package notify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// failed publishes a Failed phase event of job in ws with a reason and a message.
func (e *env) failed(ws, job string, seq int) published {
	e.t.Helper()
	uid := ws + "-" + job + "-uid"
	ev, err := events.New(uid+":status:"+strconv.Itoa(seq), events.TypeJobPhase, ws, events.JobSource(ws, job), job, time.Now(),
		events.JobPhaseData{Job: job, UID: uid, Seq: seq, Phase: "Failed", Previous: "Running", Reason: "Hang",
			Message: "no progress for 10m <!channel>", Labels: map[string]string{"team": "cv"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.publish(ws, events.JobStatusSubject(ws, job), ev)
}

// decodeBody decodes a request's JSON body, failing the test when it is not JSON.
func decodeBody(t *testing.T, r request) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return v
}

// path walks decoded JSON: strings index objects, ints index arrays.
func path(t *testing.T, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: %T is not an object", k, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at [%d]: %v is not an array that long", k, v)
			}
			v = a[k]
		}
	}
	return v
}

func str(t *testing.T, v any, keys ...any) string {
	t.Helper()
	s, ok := path(t, v, keys...).(string)
	if !ok {
		t.Fatalf("%v at %v is not a string", path(t, v, keys...), keys)
	}
	return s
}

// wantContains fails t unless s contains every part.
func wantContains(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s %q lacks %q", what, s, p)
		}
	}
}

// TestWebhookFormats: each chat format's receiver gets the platform's body shape, with
// the human-readable message (name, workspace, phase, reason, message, console link),
// the X-OpenDLC-Signature over the body as sent, and, for DingTalk and Feishu robots
// with signing on, a signature that verifies the way the platform checks it.
func TestWebhookFormats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const botSecret = "SECbot-signing-secret"
	rc := newReceiver(t, ok)
	d := e.start(notify.WithConsoleURL("https://dlc.example.com/"))
	formats := []schemas.WebhookFormat{schemas.FormatSlack, schemas.FormatDingTalk, schemas.FormatFeishu, schemas.FormatWeCom, schemas.FormatTemplate}
	for _, f := range formats {
		e.put(d, webhookRule("a", string(f), rc.url()+"?format="+string(f)+"&access_token=tok", func(r *schemas.NotificationRule) {
			w := r.Spec.Webhook
			w.Format = f
			switch f {
			case schemas.FormatDingTalk, schemas.FormatFeishu:
				w.BotSecret = botSecret
			case schemas.FormatTemplate:
				w.Template = &schemas.WebhookTemplate{
					Body:        `{"summary":{{json .Title}},"team":{{json (index .Event "data" "labels" "team")}},"link":{{json .Link}},"seq":{{index .Event "data" "seq"}}}`,
					ContentType: "application/vnd.team+json",
				}
			}
		}))
	}
	before := time.Now()
	p := e.failed("a", "resnet", 7)
	rc.waitDelivered(len(formats))
	e.waitProcessed("a")
	after := time.Now()

	link := "https://dlc.example.com/ui/ws/a/jobs/resnet"
	seen := map[string]bool{}
	for _, r := range rc.all() {
		f := r.header.Get(notify.HeaderRule)
		f = strings.TrimPrefix(f, "a/")
		seen[f] = true
		if r.eventID != p.id {
			t.Errorf("%s: event id %q, want %q", f, r.eventID, p.id)
		}
		if !notify.VerifySignature([]byte(testSecret), r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("%s: X-OpenDLC-Signature does not verify over the body as sent", f)
		}
		ct := r.header.Get("Content-Type")
		if f == "template" {
			wantEqual(t, "template content type", "application/vnd.team+json", ct)
		} else {
			wantEqual(t, f+" content type", "application/json", ct)
		}
		v := decodeBody(t, r)
		switch f {
		case "slack":
			text := str(t, v, "text")
			wantContains(t, "slack text", text, "*Job resnet Failed: Hang*", "*Workspace:* a", "*Phase:* Running → Failed",
				"*Reason:* Hang", "no progress for 10m &lt;!channel&gt;", "<"+link+"|Open in the console>")
			wantEqual(t, "slack block type", "section", str(t, v, "blocks", 0, "type"))
			wantEqual(t, "slack block text type", "mrkdwn", str(t, v, "blocks", 0, "text", "type"))
			wantEqual(t, "slack block text", text, str(t, v, "blocks", 0, "text", "text"))
		case "dingtalk":
			wantEqual(t, "dingtalk msgtype", "markdown", str(t, v, "msgtype"))
			wantEqual(t, "dingtalk title", "Job resnet Failed: Hang", str(t, v, "markdown", "title"))
			wantContains(t, "dingtalk text", str(t, v, "markdown", "text"), "#### Job resnet Failed: Hang", "**Workspace:** a",
				"**Reason:** Hang", "[Open in the console]("+link+")")
			verifyDingTalk(t, r, botSecret, before, after)
		case "feishu":
			wantEqual(t, "feishu msg_type", "interactive", str(t, v, "msg_type"))
			wantEqual(t, "feishu header", "Job resnet Failed: Hang", str(t, v, "card", "header", "title", "content"))
			wantEqual(t, "feishu header colour", "red", str(t, v, "card", "header", "template"))
			wantEqual(t, "feishu text tag", "lark_md", str(t, v, "card", "elements", 0, "text", "tag"))
			wantContains(t, "feishu text", str(t, v, "card", "elements", 0, "text", "content"), "**Workspace:** a", "**Reason:** Hang")
			wantEqual(t, "feishu button", link, str(t, v, "card", "elements", 1, "actions", 0, "url"))
			verifyFeishu(t, v, botSecret, before, after)
		case "wecom":
			wantEqual(t, "wecom msgtype", "markdown", str(t, v, "msgtype"))
			wantContains(t, "wecom content", str(t, v, "markdown", "content"), "### Job resnet Failed: Hang", "**Message:** no progress for 10m",
				"[Open in the console]("+link+")")
		case "template":
			wantEqual(t, "template body", map[string]any{"summary": "Job resnet Failed: Hang", "team": "cv", "link": link, "seq": 7.0}, v)
		default:
			t.Errorf("request of unknown rule %q", f)
		}
	}
	wantEqual(t, "formats received", map[string]bool{"slack": true, "dingtalk": true, "feishu": true, "wecom": true, "template": true}, seen)
}

// verifyDingTalk checks a request as DingTalk does: the timestamp query parameter is
// within an hour of now, and sign is the base64 HMAC-SHA256 of "timestamp\nsecret".
func verifyDingTalk(t *testing.T, r request, secret string, before, after time.Time) {
	t.Helper()
	u, err := url.Parse(r.url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	wantEqual(t, "dingtalk access token kept", "tok", q.Get("access_token"))
	ms, err := strconv.ParseInt(q.Get("timestamp"), 10, 64)
	if err != nil {
		t.Fatalf("dingtalk timestamp %q: %v", q.Get("timestamp"), err)
	}
	if ts := time.UnixMilli(ms); ts.Before(before.Add(-time.Second)) || ts.After(after.Add(time.Second)) {
		t.Errorf("dingtalk timestamp %v not between %v and %v", ts, before, after)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(q.Get("timestamp") + "\n" + secret))
	want := base64.StdEncoding.EncodeToString(m.Sum(nil))
	wantEqual(t, "dingtalk sign", want, q.Get("sign"))
	if !strings.Contains(u.RawQuery, "sign="+url.QueryEscape(want)) {
		t.Errorf("dingtalk sign is not URL-escaped in %q", u.RawQuery)
	}
}

// verifyFeishu checks a body as Feishu does: timestamp (seconds) and sign, the base64
// HMAC-SHA256 keyed with "timestamp\nsecret" of nothing.
func verifyFeishu(t *testing.T, v map[string]any, secret string, before, after time.Time) {
	t.Helper()
	ts := str(t, v, "timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("feishu timestamp %q: %v", ts, err)
	}
	if sec < before.Unix()-1 || sec > after.Unix()+1 {
		t.Errorf("feishu timestamp %d not between %d and %d", sec, before.Unix(), after.Unix())
	}
	m := hmac.New(sha256.New, []byte(ts+"\n"+secret))
	wantEqual(t, "feishu sign", base64.StdEncoding.EncodeToString(m.Sum(nil)), str(t, v, "sign"))
}

// TestPlatformErrorCodeIsRetried: a chat platform that answers 200 with a non-zero error
// code (a bad signature, a rate limit) has not delivered: the attempt is retried, and
// after maxAttempts the event is dead-lettered with the code.
func TestPlatformErrorCodeIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lark := newPlatformReceiver(t, func(prior int) string {
		if prior < 2 {
			return `{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}`
		}
		return `{"code":0,"msg":"success"}`
	})
	ding := newPlatformReceiver(t, func(int) string { return `{"errcode":310000,"errmsg":"sign not match"}` })
	d := e.start()
	e.put(d, webhookRule("a", "lark", lark.url(), func(r *schemas.NotificationRule) { r.Spec.Webhook.Format = schemas.FormatFeishu }))
	e.put(d, webhookRule("a", "ding", ding.url(), func(r *schemas.NotificationRule) {
		r.Spec.Webhook.Format = schemas.FormatDingTalk
		r.Spec.Delivery.MaxAttempts = 2
	}))
	p := e.failed("a", "resnet", 3)
	e.waitProcessed("a")

	attempts := func(rc *receiver) []int {
		var out []int
		for _, r := range rc.all() {
			out = append(out, r.attempt)
		}
		return out
	}
	wantEqual(t, "feishu attempts", []int{1, 2, 3}, attempts(lark))
	wantEqual(t, "dingtalk attempts", []int{1, 2}, attempts(ding))
	var letters []notify.DeadLetter
	for _, m := range e.notifyMsgs(schemas.DefaultDeadLetterSubject("a")) {
		var l notify.DeadLetter
		if err := json.Unmarshal(m.Data, &l); err != nil {
			t.Fatal(err)
		}
		letters = append(letters, l)
	}
	if len(letters) != 1 {
		t.Fatalf("dead letters %+v, want one of rule ding", letters)
	}
	l := letters[0]
	wantEqual(t, "dead letter", []any{"ding", p.id, 2, "dingtalk answered error code 310000"}, []any{l.Rule, l.EventID, l.Attempts, l.Error})
}
