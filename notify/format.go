package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// Content types of the formatted bodies.
const (
	jsonContentType     = "application/json"
	templateContentType = "application/json"
)

// request is what one webhook attempt sends.
type request struct {
	url         string
	body        []byte
	contentType string
}

// render makes the request of one attempt for the webhook's format. botSecret is the
// DingTalk or Feishu robot's signing secret, or nil; now is the attempt's time, which
// those platforms' signatures cover.
func (d *Dispatcher) render(ev *event, w *schemas.WebhookTarget, botSecret []byte, now time.Time) (*request, error) {
	if w.Format == "" || w.Format == schemas.FormatCloudEvents {
		return &request{url: w.URL, body: ev.raw, contentType: ContentType}, nil
	}
	m := message(ev, d.o.ConsoleURL)
	r := &request{url: w.URL, contentType: jsonContentType}
	var v any
	switch w.Format {
	case schemas.FormatSlack:
		v = slackBody(m)
	case schemas.FormatDingTalk:
		v = map[string]any{"msgtype": "markdown", "markdown": map[string]string{"title": m.Title, "text": markdownText(m, "#### ")}}
		if botSecret != nil {
			ts := strconv.FormatInt(now.UnixMilli(), 10)
			u, err := url.Parse(w.URL)
			if err != nil {
				return nil, err
			}
			q := u.Query()
			q.Set("timestamp", ts)
			q.Set("sign", DingTalkSign(botSecret, ts))
			u.RawQuery = q.Encode()
			r.url = u.String()
		}
	case schemas.FormatFeishu:
		body := map[string]any{"msg_type": "interactive", "card": feishuCard(m)}
		if botSecret != nil {
			ts := strconv.FormatInt(now.Unix(), 10)
			body["timestamp"] = ts
			body["sign"] = FeishuSign(botSecret, ts)
		}
		v = body
	case schemas.FormatWeCom:
		v = map[string]any{"msgtype": "markdown", "markdown": map[string]string{"content": truncate(markdownText(m, "### "), 4000)}}
	case schemas.FormatTemplate:
		t, err := schemas.ParseNotificationTemplate(w.Template.Body)
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		out, err := schemas.ExecuteNotificationTemplate(t, m)
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		r.body = out
		r.contentType = templateContentType
		if w.Template.ContentType != "" {
			r.contentType = w.Template.ContentType
		}
		return r, nil
	default:
		return nil, fmt.Errorf("unknown webhook format %q", w.Format)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	r.body = b
	return r, nil
}

// DingTalkSign is the sign query parameter of a DingTalk robot request: the base64
// HMAC-SHA256, keyed with the robot's secret, of "<timestamp>\n<secret>" (the request
// URL-escapes it). timestamp is in milliseconds.
func DingTalkSign(secret []byte, timestamp string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp + "\n" + string(secret)))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// FeishuSign is the sign field of a Feishu/Lark custom bot body: the base64
// HMAC-SHA256, keyed with "<timestamp>\n<secret>", of an empty message. timestamp is in
// seconds.
func FeishuSign(secret []byte, timestamp string) string {
	m := hmac.New(sha256.New, []byte(timestamp+"\n"+string(secret)))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// facts are the message's lines after the title, as label and value.
func facts(m *schemas.NotificationMessage) [][2]string {
	var out [][2]string
	add := func(k, v string) {
		if v != "" {
			out = append(out, [2]string{k, oneLine(v)})
		}
	}
	add("Workspace", m.Workspace)
	if m.Kind == "Alert" {
		// The alert's rule and job, and its state rather than a phase.
		data, _ := m.Event["data"].(map[string]any)
		job, _ := data["job"].(string)
		add("Rule", m.Name)
		add("Job", job)
		add("State", m.Phase)
	} else {
		add(m.Kind, m.Name)
	}
	add("Step", m.Step)
	switch {
	case m.Kind == "Alert": // its state is above
	case m.Previous != "" && m.Phase != "":
		add("Phase", m.Previous+" → "+m.Phase)
	default:
		add("Phase", m.Phase)
	}
	add("Reason", m.Reason)
	add("Message", m.Message)
	if !m.Time.IsZero() {
		add("Time", m.Time.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	return out
}

// markdownText is the message as Markdown for DingTalk and WeCom: a heading, one bold
// label per line, and the link.
func markdownText(m *schemas.NotificationMessage, heading string) string {
	var b strings.Builder
	b.WriteString(heading + m.Title + "\n\n")
	for _, f := range facts(m) {
		b.WriteString("**" + f[0] + ":** " + f[1] + "\n\n")
	}
	if m.Link != "" {
		b.WriteString("[Open in the console](" + m.Link + ")\n")
	}
	return b.String()
}

// slackEscape escapes what Slack's mrkdwn reads as control sequences (&, <, >), so an
// event's text cannot mention @channel or forge a link.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackBody is a Slack incoming-webhook message: text (the notification's fallback, and
// what Mattermost and Rocket.Chat show) and a section block in mrkdwn.
func slackBody(m *schemas.NotificationMessage) map[string]any {
	var b strings.Builder
	b.WriteString("*" + slackEscape(m.Title) + "*\n")
	for _, f := range facts(m) {
		b.WriteString("*" + f[0] + ":* " + slackEscape(f[1]) + "\n")
	}
	if m.Link != "" {
		b.WriteString("<" + slackEscape(m.Link) + "|Open in the console>\n")
	}
	text := truncate(b.String(), 3000) // a section's text holds at most 3000 characters
	return map[string]any{
		"text": text,
		"blocks": []any{
			map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": text}},
		},
	}
}

// feishuCard is a Feishu/Lark interactive card: a coloured header with the title, a
// lark_md block with the facts, and a button to the console.
func feishuCard(m *schemas.NotificationMessage) map[string]any {
	var b strings.Builder
	for _, f := range facts(m) {
		b.WriteString("**" + f[0] + ":** " + f[1] + "\n")
	}
	elements := []any{map[string]any{"tag": "div", "text": map[string]string{"tag": "lark_md", "content": b.String()}}}
	if m.Link != "" {
		elements = append(elements, map[string]any{"tag": "action", "actions": []any{map[string]any{
			"tag": "button", "text": map[string]string{"tag": "plain_text", "content": "Open in the console"},
			"type": "default", "url": m.Link,
		}}})
	}
	color := "blue"
	switch m.Phase {
	case "Failed", "firing":
		color = "red"
	case "Succeeded", "resolved":
		color = "green"
	case "Stopped", "Cancelled", "Skipped", "Missed":
		color = "grey"
	}
	return map[string]any{
		"config":   map[string]any{"wide_screen_mode": true},
		"header":   map[string]any{"title": map[string]string{"tag": "plain_text", "content": m.Title}, "template": color},
		"elements": elements,
	}
}
