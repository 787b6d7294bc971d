package triggers

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// OwnEventSubjects are the DLC_EVENTS subjects a trigger with an events source listens
// to, in every workspace: the status events of jobs, experiments (and their trials),
// pipelines and schedules. Metric reports, trigger fired events and node health are not
// among them.
var OwnEventSubjects = []string{
	events.JobStatusSubject("*", "*"),
	events.ExperimentStatusSubject("*", "*"),
	events.ExperimentTrialSubject("*", "*"),
	events.PipelineStatusSubject("*", "*"),
	events.ScheduleRunSubject("*", "*"),
}

// OwnEventsConsumer is the name of the durable consumer on DLC_EVENTS of a dispatcher
// whose inbound consumer is named consumer.
func OwnEventsConsumer(consumer string) string { return consumer + "-events" }

// ownEventsKey is where the dispatcher files a workspace's triggers on its own events
// (bySubject): a key no NATS subject can be.
func ownEventsKey(workspace string) string { return "events:" + workspace }

// startOwnEvents reads OpenDLC's status events through the durable consumer
// OwnEventsConsumer, from the events published after it was first created, as the
// inbound consumer does.
func (d *Dispatcher) startOwnEvents(ctx context.Context) error {
	cons, err := d.js.CreateOrUpdateConsumer(ctx, dlcjs.EventsStream, jetstream.ConsumerConfig{
		Durable:        OwnEventsConsumer(d.o.Consumer),
		Description:    "OpenDLC triggers on OpenDLC's own events",
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        d.o.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  256,
		FilterSubjects: OwnEventSubjects,
	})
	if err == nil {
		d.consumeOwn, err = cons.Consume(d.handleOwn, jetstream.PullMaxMessages(pullBatch))
	}
	if err != nil {
		return fmt.Errorf("triggers: consume %s: %w", dlcjs.EventsStream, err)
	}
	return nil
}

// handleOwn processes one of OpenDLC's own events: the triggers of the event's
// workspace (the subject's, which NATS permissions protect) whose events.match and
// filter select it are fired, exactly once per event as for inbound events: the event
// id is the CloudEvent's source and id.
func (d *Dispatcher) handleOwn(msg jetstream.Msg) {
	ws, _, facts, err := notify.EventFacts(msg.Subject(), msg.Data())
	var ev Event
	if err == nil {
		ev, err = ParseEvent(msg.Subject(), msg.Data())
	}
	if err != nil || ev.Workspace != ws {
		d.log.Debug("ignoring an event", "subject", msg.Subject(), "error", err)
		_ = msg.Ack()
		return
	}
	d.catchUp(d.ctx)
	d.dispatch(msg, ev, d.matching(ownEventsKey(ws)), func(t *schemas.Trigger) bool {
		if t.Metadata.Workspace != ws || t.Spec.Events == nil || !t.Spec.Events.Match.Matches(facts) || !t.Spec.Matches(ev.Doc) {
			return false
		}
		if startedBy(t.Metadata.Name, facts, ev) {
			d.log.Debug("trigger not fired by an event of what it started", "workspace", ws, "trigger", t.Metadata.Name, "event", ev.ID)
			return false
		}
		return true
	})
}

// startedBy reports whether an event is about something the trigger started, which
// never fires the trigger again (a loop): the event's labels name the trigger
// (schemas.LabelTrigger: its jobs, its pipeline runs' step jobs), or the object the
// event is about is named as the trigger names what it starts (<trigger>-<10 hex
// digits>, maybe followed by -<more>: its runs, experiments, their steps' jobs and
// trials).
func startedBy(trigger string, facts schemas.EventFacts, ev Event) bool {
	if facts.Labels[schemas.LabelTrigger] == trigger {
		return true
	}
	names := []string{facts.Job, ev.Key}
	if data, ok := ev.Doc["data"].(map[string]any); ok {
		for _, k := range []string{"job", "experiment", "pipeline"} {
			if s, ok := data[k].(string); ok {
				names = append(names, s)
			}
		}
	}
	for _, n := range names {
		if isRunOf(trigger, n) {
			return true
		}
	}
	return false
}

// isRunOf reports whether name is schemas.TriggerRunName of trigger for some event, or
// starts with one followed by '-'.
func isRunOf(trigger, name string) bool {
	rest, ok := strings.CutPrefix(name, trigger+"-")
	if !ok || len(rest) < runHashDigits {
		return false
	}
	if _, err := hex.DecodeString(rest[:runHashDigits]); err != nil || strings.ToLower(rest[:runHashDigits]) != rest[:runHashDigits] {
		return false
	}
	return len(rest) == runHashDigits || rest[runHashDigits] == '-'
}

// runHashDigits is how many hex digits schemas.TriggerRunName appends.
var runHashDigits = len(schemas.TriggerRunName("t", "")) - len("t-")
