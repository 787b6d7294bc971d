package triggers

import (
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// An event about what a trigger started does not fire that trigger again; an event
// about anything else does.
func TestStartedBy(t *testing.T) {
	run := schemas.TriggerRunName("deploy", "some event")
	for name, tc := range map[string]struct {
		facts schemas.EventFacts
		ev    Event
		want  bool
	}{
		"its job by label":      {schemas.EventFacts{Job: "x", Labels: map[string]string{schemas.LabelTrigger: "deploy"}}, Event{}, true},
		"its job by name":       {schemas.EventFacts{Job: run}, Event{}, true},
		"its pipeline step job": {schemas.EventFacts{Job: run + "-train"}, Event{}, true},
		"its pipeline run":      {schemas.EventFacts{}, Event{Key: "p", Doc: map[string]any{"data": map[string]any{"pipeline": run}}}, true},
		"another trigger's run": {schemas.EventFacts{Job: schemas.TriggerRunName("train", "e"), Labels: map[string]string{schemas.LabelTrigger: "train"}}, Event{}, false},
		"a job named like it":   {schemas.EventFacts{Job: "deploy-prod"}, Event{}, false},
		"not hex":               {schemas.EventFacts{Job: "deploy-zzzzzzzzzz"}, Event{}, false},
		"longer trigger name":   {schemas.EventFacts{Job: schemas.TriggerRunName("deploy-x", "e")}, Event{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := startedBy("deploy", tc.facts, tc.ev); got != tc.want {
				t.Errorf("startedBy = %v, want %v", got, tc.want)
			}
		})
	}
}

// A debounced pipeline run gets the implicit params its pipeline declares, and only
// those.
func TestPipelineParamsKeepsDeclaredImplicitParams(t *testing.T) {
	p := &schemas.PipelineSpec{Params: []schemas.PipelineParam{{Name: "key"}, {Name: schemas.ParamEvents}}}
	got := pipelineParams(p, map[string]string{"key": "k", schemas.ParamEvents: "[]", schemas.ParamEventCount: "0"})
	if len(got) != 2 || got["key"] != "k" || got[schemas.ParamEvents] != "[]" {
		t.Errorf("params %v: want key and events", got)
	}
}
