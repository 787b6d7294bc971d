package jetstream

import (
	"errors"
	"fmt"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// A kind registers its subjects with the streams once, here: the functions that make
// the subjects its objects publish and listen on, by the stream that keeps them. The
// streams' subjects (EventSubjects, LogSubjects, InboundSubjects) are made from these
// registrations, each function called with wildcards for workspace and name.
// TestEveryKindHasSubjects ranges over schemas.Kinds() and fails for a kind missing
// here.

// subjectOf makes the subject of one object: of workspace ws, named name.
type subjectOf func(ws, name string) string

// kindSubjects is a kind's registration with the streams.
type kindSubjects struct {
	kind schemas.Kind
	// events are published to EventsStream (status, progress), logs to LogsStream.
	events, logs []subjectOf
	// inbound are listened on, in InboundStream.
	inbound []subjectOf
	// notify are published to NotifyStream.
	notify []subjectOf
	// none, for a kind that neither publishes nor listens, says why.
	none string
}

// notifySubject is what a notification rule publishes on: dead letters and forwarded
// events, under dlc.<workspace>.notify (package notify).
func notifySubject(ws, _ string) string { return "dlc." + ws + ".notify.>" }

// streamKinds are the kinds that publish or listen, in the order their subjects are
// declared in the streams.
var streamKinds = registerStreamKinds(
	kindSubjects{kind: schemas.KindTrainingJob,
		events: []subjectOf{events.JobStatusSubject, events.JobMetricsSubject, events.JobResourcesSubject},
		logs:   []subjectOf{events.JobLogsFilter}},
	kindSubjects{kind: schemas.KindExperiment, events: []subjectOf{events.ExperimentTrialSubject, events.ExperimentStatusSubject}},
	kindSubjects{kind: schemas.KindSchedule, events: []subjectOf{events.ScheduleRunSubject}},
	kindSubjects{kind: schemas.KindTrigger,
		events:  []subjectOf{events.TriggerFiredSubject},
		inbound: []subjectOf{events.TriggerInboundSubject}},
	kindSubjects{kind: schemas.KindPipeline, events: []subjectOf{events.PipelineStatusSubject}},
	kindSubjects{kind: schemas.KindNotificationRule, events: []subjectOf{events.AlertSubject}, notify: []subjectOf{notifySubject}},
	kindSubjects{kind: schemas.KindPipelineTemplate,
		none: "a pipeline template is a stored document; its runs publish as pipelines"},
)

// registerStreamKinds refuses a registration without subjects: the package does not
// load, and its tests say why.
func registerStreamKinds(ks ...kindSubjects) []kindSubjects {
	for _, k := range ks {
		if err := k.check(); err != nil {
			panic("events/jetstream: " + err.Error())
		}
	}
	return ks
}

// check names what a registration misses.
func (k kindSubjects) check() error {
	var errs []error
	n := len(k.events) + len(k.logs) + len(k.inbound) + len(k.notify)
	if n == 0 && k.none == "" {
		errs = append(errs, fmt.Errorf("kind %s registers no subjects, and no reason why it needs none", k.kind))
	}
	if n > 0 && k.none != "" {
		errs = append(errs, fmt.Errorf("kind %s registers subjects and a reason why it needs none", k.kind))
	}
	for _, fs := range [][]subjectOf{k.events, k.logs, k.inbound, k.notify} {
		for _, f := range fs {
			if f == nil {
				errs = append(errs, fmt.Errorf("kind %s registers a nil subject function", k.kind))
			}
		}
	}
	return errors.Join(errs...)
}

// kindWildcards are the subjects of every kind that one of its fields (events, logs...)
// names, with wildcards for workspace and name.
func kindWildcards(field func(kindSubjects) []subjectOf) []string {
	var out []string
	for _, k := range streamKinds {
		for _, f := range field(k) {
			out = append(out, f("*", "*"))
		}
	}
	return out
}
