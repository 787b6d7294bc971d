package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"text/template"
	tparse "text/template/parse"
	"time"
)

// NotificationMessage is the human-readable form of one event that chat formats, e-mail
// and user templates are made from.
type NotificationMessage struct {
	// Title is one line: "Job resnet Failed: BackoffLimitExceeded".
	Title string
	// Text is the plain-text message: the title's facts, one per line, then the event's
	// message and the link.
	Text string
	// Kind is what the event is about: Job, Experiment, Trial, Pipeline, Schedule, or
	// the event type for others.
	Kind string
	// Name is the job's, experiment's, pipeline's or schedule's name.
	Name string
	// Step is a pipeline step's name; empty for the run's own events.
	Step string
	// Workspace is the event's workspace.
	Workspace string
	// Phase is the phase the event reports (a schedule run's action); empty when none.
	Phase string
	// Previous is the phase before, when the event says.
	Previous string
	// Reason and Message are the event's data.reason and data.message.
	Reason string
	// Message: see Reason.
	Message string
	// Type, ID and Time are the CloudEvent's.
	Type string
	// ID is the event id.
	ID string
	// Time is when the event happened.
	Time time.Time
	// Link is the web console's page of the job, experiment, pipeline or schedule, when
	// the console's URL is configured; else empty.
	Link string
	// Event is the whole CloudEvent, decoded (.Event.data.labels...); numbers are kept
	// as their JSON text.
	Event map[string]any
}

// Bounds of a user template's output.
const (
	// MaxTemplateOutput bounds the body a template makes.
	MaxTemplateOutput = 256 << 10
	// TemplateTimeout bounds a template's execution.
	TemplateTimeout = time.Second
	// maxRangeDepth bounds nested range actions.
	maxRangeDepth = 2
)

// errTemplateOutput is returned when a template writes more than MaxTemplateOutput.
var errTemplateOutput = fmt.Errorf("output exceeds %d bytes", MaxTemplateOutput)

// templateFuncs are the functions a user template may call besides text/template's own;
// none reaches outside the message.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

// ParseNotificationTemplate parses a webhook template. Range over a number, range nested
// more than twice and template calls inside a range are refused, so that execution stays
// bounded.
func ParseNotificationTemplate(body string) (*template.Template, error) {
	t, err := template.New("body").Funcs(templateFuncs).Parse(body)
	if err != nil {
		return nil, err
	}
	for _, tt := range t.Templates() {
		if tt.Tree == nil {
			continue
		}
		if err := checkTemplateNode(tt.Root, 0); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func checkTemplateNode(n tparse.Node, ranges int) error {
	switch n := n.(type) {
	case *tparse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkTemplateNode(c, ranges); err != nil {
				return err
			}
		}
	case *tparse.RangeNode:
		if ranges+1 > maxRangeDepth {
			return fmt.Errorf("line %d: range nested more than %d deep", n.Line, maxRangeDepth)
		}
		if cmds := n.Pipe.Cmds; len(cmds) > 0 && len(cmds[len(cmds)-1].Args) == 1 {
			if _, ok := cmds[len(cmds)-1].Args[0].(*tparse.NumberNode); ok {
				return fmt.Errorf("line %d: range over a number is not allowed", n.Line)
			}
		}
		if err := checkTemplateNode(n.List, ranges+1); err != nil {
			return err
		}
		return checkTemplateNode(n.ElseList, ranges)
	case *tparse.IfNode:
		if err := checkTemplateNode(n.List, ranges); err != nil {
			return err
		}
		return checkTemplateNode(n.ElseList, ranges)
	case *tparse.WithNode:
		if err := checkTemplateNode(n.List, ranges); err != nil {
			return err
		}
		return checkTemplateNode(n.ElseList, ranges)
	case *tparse.TemplateNode:
		// A template that calls itself ends at text/template's depth limit; one that
		// calls another inside a range counts as nested: refuse calls inside ranges.
		if ranges > 0 {
			return fmt.Errorf("line %d: template calls inside range are not allowed", n.Line)
		}
	}
	return nil
}

// limitedBuffer fails writes past MaxTemplateOutput.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxTemplateOutput {
		return 0, errTemplateOutput
	}
	return b.Buffer.Write(p)
}

// ExecuteNotificationTemplate runs t on m, bounded by MaxTemplateOutput and
// TemplateTimeout.
func ExecuteNotificationTemplate(t *template.Template, m *NotificationMessage) ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		var b limitedBuffer
		err := t.Execute(&b, m)
		done <- result{b.Bytes(), err}
	}()
	timer := time.NewTimer(TemplateTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		return r.out, nil
	case <-timer.C:
		return nil, errors.New("template took longer than " + TemplateTimeout.String())
	}
}

// SampleNotificationMessage is the message a template is tried on when a rule is
// applied: a failed job with every field set.
func SampleNotificationMessage() *NotificationMessage {
	return &NotificationMessage{
		Title: "Job resnet Failed: Hang", Text: "Job resnet Failed: Hang\nworkspace: vision",
		Kind: "Job", Name: "resnet", Workspace: "vision", Phase: "Failed", Previous: "Running",
		Reason: "Hang", Message: "no progress for 10m", Type: "opendlc.job.phase.v1", ID: "uid:status:5",
		Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Link: "https://console.example.com/ui/ws/vision/jobs/resnet",
		Event: map[string]any{"id": "uid:status:5", "type": "opendlc.job.phase.v1", "workspace": "vision",
			"data": map[string]any{"job": "resnet", "phase": "Failed", "reason": "Hang", "labels": map[string]any{}}},
	}
}
