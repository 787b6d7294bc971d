package schemas

import (
	"errors"
	"fmt"
	"slices"
)

// A kind registers once in each layer that serves it, and each layer's test ranges
// over Kinds() and fails naming the registration a kind misses (docs/architecture.md,
// "Adding a kind"). Here a kind registers its constructor and the words that name it.

// KindInfo is a kind's registration with the schemas package.
type KindInfo struct {
	Kind Kind
	// Noun and Plural name the kind's objects to users: the CLI's noun ("dlc schedule
	// get"), the console's pages (/ui/ws/{ws}/schedules), the service's messages.
	Noun, Plural string
	// New returns an empty document of the kind; Decode fills it in.
	New func() Object
}

// kindInfos are the kinds, in the order they were added. A new kind is one entry here;
// validate, Decode and the JSON Schemas (go generate ./schemas/...) pick it up.
var kindInfos = registerKinds(
	KindInfo{Kind: KindTrainingJob, Noun: "job", Plural: "jobs", New: func() Object { return new(TrainingJob) }},
	KindInfo{Kind: KindSchedule, Noun: "schedule", Plural: "schedules", New: func() Object { return new(Schedule) }},
	KindInfo{Kind: KindNotificationRule, Noun: "rule", Plural: "rules", New: func() Object { return new(NotificationRule) }},
	KindInfo{Kind: KindPipeline, Noun: "pipeline", Plural: "pipelines", New: func() Object { return new(Pipeline) }},
	KindInfo{Kind: KindTrigger, Noun: "trigger", Plural: "triggers", New: func() Object { return new(Trigger) }},
	KindInfo{Kind: KindExperiment, Noun: "experiment", Plural: "experiments", New: func() Object { return new(Experiment) }},
	KindInfo{Kind: KindPipelineTemplate, Noun: "template", Plural: "templates", New: func() Object { return new(StoredPipelineTemplate) }},
)

// registerKinds refuses a registration that misses a part (as kueue's
// jobframework.RegisterIntegration refuses an integration without its callbacks): the
// package does not load, and every test of every package that imports it says why.
func registerKinds(infos ...KindInfo) map[Kind]KindInfo {
	m := map[Kind]KindInfo{}
	for _, in := range infos {
		if err := in.check(); err != nil {
			panic("schemas: " + err.Error())
		}
		if _, dup := m[in.Kind]; dup {
			panic(fmt.Sprintf("schemas: kind %s registered twice", in.Kind))
		}
		m[in.Kind] = in
	}
	return m
}

// check names what a registration misses.
func (in KindInfo) check() error {
	var errs []error
	if in.Kind == "" {
		errs = append(errs, errors.New("a kind registers without its Kind"))
	}
	if in.Noun == "" {
		errs = append(errs, fmt.Errorf("kind %s registers no Noun (its singular name: the CLI's noun)", in.Kind))
	}
	if in.Plural == "" {
		errs = append(errs, fmt.Errorf("kind %s registers no Plural (the console's page, the service's messages)", in.Kind))
	}
	switch {
	case in.New == nil:
		errs = append(errs, fmt.Errorf("kind %s registers no New (the constructor of its empty document)", in.Kind))
	case in.New() == nil:
		errs = append(errs, fmt.Errorf("kind %s: New returns nil", in.Kind))
	case in.New().GetKind() != in.Kind:
		errs = append(errs, fmt.Errorf("kind %s: New makes a document of kind %s", in.Kind, in.New().GetKind()))
	}
	return errors.Join(errs...)
}

// Kinds returns every document kind, sorted.
func Kinds() []Kind {
	ks := make([]Kind, 0, len(kindInfos))
	for k := range kindInfos {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Info returns a kind's registration; false for an unknown kind.
func Info(k Kind) (KindInfo, bool) {
	in, ok := kindInfos[k]
	return in, ok
}

// NewObject returns an empty document of the given kind, or nil for an unknown kind.
func NewObject(k Kind) Object {
	if in, ok := kindInfos[k]; ok {
		return in.New()
	}
	return nil
}
