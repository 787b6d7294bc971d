package notify

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// maxMessageText bounds the event's own message (data.message) in a notification.
const maxMessageText = 2000

// message returns the human-readable form of ev. consoleURL, when set, is the web
// console's base URL ("https://dlc.example.com"), from which the link is made.
func message(ev *event, consoleURL string) *schemas.NotificationMessage {
	d := ev.data
	m := &schemas.NotificationMessage{
		Workspace: ev.workspace, Type: ev.env.Type, ID: ev.id, Time: ev.env.Time,
		Phase: d.Phase, Previous: d.Previous, Reason: d.Reason, Message: truncate(d.Message, maxMessageText),
	}
	var page string // the console page under /ui/ws/<workspace>/
	switch {
	case ev.env.Type == events.TypeAlert:
		// "Alert idle-gpu firing: job resnet gpu.utilization below 10 for 15m0s (last 3)"
		m.Kind, m.Name, m.Phase, page = "Alert", d.Rule, d.State, "jobs/"+d.Job
	case d.Pipeline != "":
		m.Kind, m.Name, m.Step, page = "Pipeline", d.Pipeline, d.Step, "pipelines/"+d.Pipeline
	case ev.env.Type == "opendlc.experiment.trial.v1":
		m.Kind, m.Name, page = "Trial", d.Experiment, "experiments/"+d.Experiment
	case d.Experiment != "":
		m.Kind, m.Name, page = "Experiment", d.Experiment, "experiments/"+d.Experiment
	case d.Schedule != "":
		m.Kind, m.Name, page = "Schedule", d.Schedule, "schedules/"+d.Schedule
		if m.Phase == "" {
			m.Phase = d.Action
		}
	case ev.facts.Job != "" && strings.HasPrefix(ev.env.Type, "opendlc.job."):
		m.Kind, m.Name, page = "Job", ev.facts.Job, "jobs/"+ev.facts.Job
	default:
		m.Kind, m.Name = ev.env.Type, ev.env.Subject
	}
	if consoleURL != "" && page != "" {
		m.Link = strings.TrimSuffix(consoleURL, "/") + "/ui/ws/" + url.PathEscape(ev.workspace) + "/" + page
	}

	// Title: "Pipeline nightly step train Failed: Hang", "Experiment tune trial 3
	// Succeeded".
	var t strings.Builder
	if m.Kind == "Trial" {
		t.WriteString("Experiment " + m.Name + " trial " + d.Trial)
	} else {
		t.WriteString(m.Kind)
		if m.Name != "" {
			t.WriteString(" " + m.Name)
		}
	}
	if m.Step != "" {
		t.WriteString(" step " + m.Step)
	}
	if m.Phase != "" {
		t.WriteString(" " + m.Phase)
	}
	switch {
	case m.Kind == "Alert":
		t.WriteString(": job " + d.Job)
		if d.Message != "" {
			t.WriteString(" " + truncate(d.Message, 200))
		}
	case m.Reason != "":
		t.WriteString(": " + m.Reason)
	}
	m.Title = oneLine(t.String())

	var b strings.Builder
	b.WriteString(m.Title + "\n")
	line := func(k, v string) {
		if v != "" {
			b.WriteString(k + ": " + oneLine(v) + "\n")
		}
	}
	line("workspace", m.Workspace)
	if m.Kind == "Alert" {
		line("rule", m.Name)
	} else {
		line(strings.ToLower(m.Kind), m.Name)
	}
	line("step", m.Step)
	line("job", jobOf(m, ev))
	switch {
	case m.Kind == "Alert":
		line("state", m.Phase)
	case m.Previous != "":
		line("phase", m.Previous+" -> "+m.Phase)
	default:
		line("phase", m.Phase)
	}
	line("reason", m.Reason)
	line("message", m.Message)
	line("time", m.Time.UTC().Format("2006-01-02 15:04:05 UTC"))
	line("event", m.Type+" "+m.ID)
	line("link", m.Link)
	m.Text = b.String()

	dec := json.NewDecoder(bytes.NewReader(ev.raw))
	dec.UseNumber()
	_ = dec.Decode(&m.Event)
	return m
}

// jobOf names the job of a pipeline step, which the message's name does not.
func jobOf(m *schemas.NotificationMessage, ev *event) string {
	if m.Kind == "Job" {
		return ""
	}
	return ev.data.Job
}

// oneLine replaces line breaks and other control characters with spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
