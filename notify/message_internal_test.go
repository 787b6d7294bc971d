package notify

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/events"
)

// TestMessageTitlesAndLinks: the title and console link of each kind of event.
func TestMessageTitlesAndLinks(t *testing.T) {
	at := time.Date(2026, 12, 1, 20, 0, 7, 0, time.UTC)
	tests := map[string]struct {
		subject, typ string
		data         any
		title, link  string
	}{
		"job": {"dlc.vision.job.resnet.status", events.TypeJobPhase,
			events.JobPhaseData{Job: "resnet", Phase: "Failed", Previous: "Running", Reason: "ReplicaFailed"},
			"Job resnet Failed: ReplicaFailed", "https://dlc.example.com/ui/ws/vision/jobs/resnet"},
		"pipeline step": {"dlc.vision.pipeline.nightly.status", events.TypePipelinePhase,
			events.PipelinePhaseData{Pipeline: "nightly", Step: "train", Job: "nightly-train-0", Phase: "Failed", Reason: "Hang"},
			"Pipeline nightly step train Failed: Hang", "https://dlc.example.com/ui/ws/vision/pipelines/nightly"},
		"experiment": {"dlc.vision.experiment.tune.status", events.TypeExperimentPhase,
			events.ExperimentPhaseData{Experiment: "tune", Phase: "Succeeded"},
			"Experiment tune Succeeded", "https://dlc.example.com/ui/ws/vision/experiments/tune"},
		"trial": {"dlc.vision.experiment.tune.trial", events.TypeExperimentTrial,
			events.TrialData{Experiment: "tune", Trial: "3", Phase: "Succeeded"},
			"Experiment tune trial 3 Succeeded", "https://dlc.example.com/ui/ws/vision/experiments/tune"},
		"schedule": {"dlc.vision.schedule.every-night.run", events.TypeScheduleRun,
			events.ScheduleRunData{Schedule: "every-night", Action: "Started"},
			"Schedule every-night Started", "https://dlc.example.com/ui/ws/vision/schedules/every-night"},
		"node health": {"dlc.vision.node.n1.health", events.TypeNodeHealth,
			events.NodeHealthData{Node: "n1", Status: "Unhealthy"}, "opendlc.node.health.v1 n1", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ev, err := events.New("id-1", tt.typ, "vision", "/src", "n1", at, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			pe, err := parseEvent(tt.subject, raw)
			if err != nil {
				t.Fatal(err)
			}
			m := message(pe, "https://dlc.example.com/")
			if diff := cmp.Diff([]string{tt.title, tt.link}, []string{m.Title, m.Link}); diff != "" {
				t.Errorf("title and link (-want +got):\n%s", diff)
			}
		})
	}
}
