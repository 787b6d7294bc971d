package workflows

import (
	"encoding/json"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/events"
)

// outbox is a workflow's queue of events not yet published, and the workflow goroutine
// that publishes it in order, one batch at a time, through the PublishEvents local
// activity. Publishing never blocks the state machine: if NATS is down, events queue up
// and the local activity retries without limit until it is back. Each event's id is its
// Nats-Msg-Id (a job's status events: <uid>:status:<seq>), so a retried publish is
// dropped by JetStream as a duplicate.
type outbox struct {
	logger log.Logger
	// what names the events in log lines ("status events").
	what       string
	queue      []events.Msg
	publishing bool
	closing    bool
}

// newOutbox starts the publisher goroutine of a new outbox. Start it where the
// workflow starts its goroutines: it is part of the workflow's command order.
// outboxGiveUpAfter is how long an outbox retries one batch: "without limit" in
// practice.
const outboxGiveUpAfter = 7 * 24 * time.Hour

func newOutbox(ctx workflow.Context, what string) *outbox {
	o := &outbox{logger: workflow.GetLogger(ctx), what: what}
	workflow.Go(ctx, o.publishLoop)
	return o
}

// add queues one message.
func (o *outbox) add(m events.Msg) {
	o.queue = append(o.queue, m)
}

// addEvent encodes an event and queues it on subject, with the event's id as message
// id.
func (o *outbox) addEvent(subject string, ev events.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	o.add(events.Msg{Subject: subject, ID: ev.ID, Data: b})
	return nil
}

// idle reports whether every queued message is published.
func (o *outbox) idle() bool {
	return len(o.queue) == 0 && !o.publishing
}

// drain waits until every queued event is published, then stops the publisher: queue
// nothing after it.
func (o *outbox) drain(ctx workflow.Context) {
	o.closing = true
	_ = workflow.Await(ctx, func() bool { return len(o.queue) == 0 && !o.publishing })
}

func (o *outbox) publishLoop(ctx workflow.Context) {
	for {
		_ = workflow.Await(ctx, func() bool { return len(o.queue) > 0 || o.closing })
		if len(o.queue) == 0 {
			return
		}
		batch := o.queue
		o.queue = nil
		o.publishing = true
		err := publishEvents(ctx, batch, outboxGiveUpAfter)
		o.publishing = false
		if err != nil {
			o.logger.Error(o.what+" not published", "count", len(batch), "error", err)
		}
	}
}
