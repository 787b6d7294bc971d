package events

import "fmt"

// Phase events of the kinds that run other work: an experiment's phase changes, and a
// pipeline run's and its steps'. Each has a JSON Schema in events/jsonschema/, as a job's
// phase event has.
const (
	// TypeExperimentPhase: an experiment moved to a new phase. Data: ExperimentPhaseData.
	TypeExperimentPhase = "opendlc.experiment.phase.v1"
	// TypePipelinePhase: a pipeline run, or one of its steps, moved to a new phase.
	// Data: PipelinePhaseData.
	TypePipelinePhase = "opendlc.pipeline.phase.v1"
)

func init() {
	Types = append(Types,
		struct {
			Type string
			Data any
		}{TypeExperimentPhase, ExperimentPhaseData{}},
		struct {
			Type string
			Data any
		}{TypePipelinePhase, PipelinePhaseData{}})
}

// ExperimentPhaseData is the data of a TypeExperimentPhase event.
type ExperimentPhaseData struct {
	Experiment string `json:"experiment"`
	UID        string `json:"uid"`
	// Seq numbers the experiment's events (phase and trial events share it).
	Seq      int    `json:"seq"`
	Phase    string `json:"phase" jsonschema:"enum=Pending,enum=Running,enum=Stopping,enum=Stopped,enum=Succeeded,enum=Failed"`
	Previous string `json:"previous,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	// Trials is how many trials were suggested so far, of MaxTrials; Completed,
	// Failed and Pruned count them by outcome.
	Trials    int `json:"trials"`
	MaxTrials int `json:"maxTrials"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Pruned    int `json:"pruned"`
	// BestTrial and BestValue are the best completed trial so far, if any.
	BestTrial *int     `json:"bestTrial,omitempty"`
	BestValue *float64 `json:"bestValue,omitempty"`
}

// PipelinePhaseData is the data of a TypePipelinePhase event: the run's phase when Step
// is empty, else that step's.
type PipelinePhaseData struct {
	Pipeline string `json:"pipeline"`
	UID      string `json:"uid"`
	// Seq numbers the run's events from 1, in the order of the transitions.
	Seq int `json:"seq"`
	// Step names the step whose phase changed; empty for the run's own phase.
	Step string `json:"step,omitempty"`
	// Phase is the run's (Pending, Running, Succeeded, Failed, Stopped) or the step's
	// (Pending, Running, Succeeded, Failed, Skipped, Cancelled) new phase.
	Phase    string `json:"phase" jsonschema:"enum=Pending,enum=Running,enum=Succeeded,enum=Failed,enum=Stopped,enum=Skipped,enum=Cancelled"`
	Previous string `json:"previous,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	// Job is a job step's TrainingJob; Attempt numbers the step's tries from 0
	// (steps with retries run a new job per try).
	Job     string `json:"job,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// ExperimentStatusSubject carries an experiment's phase events.
func ExperimentStatusSubject(workspace, experiment string) string {
	return fmt.Sprintf("dlc.%s.experiment.%s.status", workspace, experiment)
}

// PipelineStatusSubject carries a pipeline run's phase events and its steps'.
func PipelineStatusSubject(workspace, pipeline string) string {
	return fmt.Sprintf("dlc.%s.pipeline.%s.status", workspace, pipeline)
}

// PipelineSource is the CloudEvents source of a pipeline run's events.
func PipelineSource(workspace, pipeline string) string {
	return fmt.Sprintf("/opendlc/workspaces/%s/pipelines/%s", workspace, pipeline)
}
