package schemas

import (
	"time"

	"github.com/invopop/jsonschema"

	"github.com/opendlc/opendlc/events"
)

// KindPipeline is the kind of a Pipeline document.
const KindPipeline Kind = "Pipeline"

// Bounds of a Pipeline.
const (
	// MaxPipelineSteps bounds spec.steps.
	MaxPipelineSteps = 32
	// maxJobNameLength is the longest job name (ObjectMeta.Name's maxLength): a step's
	// job is named <pipeline>-<step> and must fit.
	maxJobNameLength = 50
)

// Labels the pipeline workflow puts on the jobs of its steps.
const (
	// LabelPipeline names the pipeline run a job belongs to.
	LabelPipeline = "opendlc.io/pipeline"
	// LabelPipelineStep names the step a job runs.
	LabelPipelineStep = "opendlc.io/pipeline-step"
)

// Pipeline is a small DAG of steps, run once: each step is a TrainingJob (preprocessing,
// training, evaluation, offline inference...) or a condition on what earlier steps
// reported. Steps run as soon as the steps they depend on have succeeded, independent
// steps in parallel; later steps read earlier steps' outputs and metrics through
// ${steps.<name>.outputs.<key>} and ${steps.<name>.metrics.<key>} (see
// docs/pipelines.md). Submitting a Pipeline starts one run, named metadata.name.
type Pipeline struct {
	// APIVersion must be opendlc.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be Pipeline.
	Kind Kind `json:"kind"`
	// Metadata names the pipeline run and its workspace; its labels are copied to every
	// step's job.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the steps and their parameters.
	Spec PipelineSpec `json:"spec"`
}

// PipelineSpec is a pipeline's parameters and steps.
type PipelineSpec struct {
	// Params are the pipeline's parameters, referred to as ${params.<name>}. A parameter
	// without a default must be given when the pipeline runs.
	Params []PipelineParam `json:"params,omitempty" jsonschema:"maxItems=32"`
	// Steps are the DAG's nodes, in any order that lists each step once; dependsOn gives
	// the edges.
	Steps []PipelineStep `json:"steps" jsonschema:"minItems=1,maxItems=32"`
	// OnExit are steps that run once every step of spec.steps has ended, whatever the
	// outcome (Succeeded, Failed or Stopped): notify, clean up, record. Besides what
	// spec.steps' steps may refer to, they may refer to the outcome as
	// ${pipeline.status}, ${pipeline.failedStep} and ${pipeline.message}, and to the
	// outputs and metrics of any step of spec.steps that succeeded; their dependsOn
	// names other onExit steps only. A failed onExit step fails a run whose steps
	// succeeded; it does not change a Failed or Stopped run's phase.
	OnExit []PipelineStep `json:"onExit,omitempty" jsonschema:"maxItems=8"`
}

// PipelineParam is one parameter of a pipeline.
type PipelineParam struct {
	// Name is referred to as ${params.<name>}: letters, digits and '_', not starting
	// with a digit.
	Name string `json:"name" jsonschema:"maxLength=64,pattern=^[A-Za-z_][A-Za-z0-9_]*$"`
	// Default is the value when none is given; without one, the parameter is required.
	Default *string `json:"default,omitempty" jsonschema:"maxLength=4096"`
	// Description says what the parameter is for.
	Description string `json:"description,omitempty" jsonschema:"maxLength=1024"`
}

// PipelineStep is one node of a pipeline: a job, or a condition. Exactly one of Job and
// Condition is set.
type PipelineStep struct {
	// Name is a DNS label, unique within the pipeline; the step's job is named
	// <pipeline>-<name>.
	Name string `json:"name" jsonschema:"maxLength=40,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// DependsOn names the steps that must finish first. The step runs only if every one
	// of them succeeded (and every condition among them held); otherwise it is Skipped.
	DependsOn []string `json:"dependsOn,omitempty" jsonschema:"maxItems=32,maxLength=40"`
	// Job is the TrainingJob spec the step runs. ${params.<name>}, ${pipeline.name},
	// ${pipeline.workspace} and the outputs and metrics of upstream steps are substituted
	// in its command, args, env values (also per role), workingDir, checkpoint.uri and
	// data URIs.
	Job *TrainingJobSpec `json:"job,omitempty"`
	// Condition gates the steps that depend on this one: when it is false they are
	// Skipped.
	Condition *StepCondition `json:"condition,omitempty"`
	// Experiment is the Experiment spec (a hyper-parameter search) the step runs, as
	// an Experiment named <pipeline>-<step>. ${params.<name>} in its trialTemplate is
	// the trial's value when <name> is a search-space parameter, else the pipeline's
	// parameter; the other references are substituted as in a job step's spec. Its
	// outputs are the best trial's: ${steps.<name>.outputs.bestParams.<param>},
	// .objective, .bestTrial, .bestJob, .experiment and, with
	// trialTemplate.checkpoint, .checkpoint (the best trial's newest complete
	// checkpoint) and .checkpointURI; its metric is the objective
	// (${steps.<name>.metrics.<objective metric>}). The step fails when the experiment
	// fails or completes no trial.
	Experiment *ExperimentSpec `json:"experiment,omitempty"`
	// Outputs name artifact URIs this job step writes (templates like the job's), so
	// later steps can refer to them as ${steps.<name>.outputs.<key>}; the job receives
	// each as DLC_OUTPUT_<KEY>. Every job step also has the outputs job (its job's
	// name), and, with spec.checkpoint, checkpointURI (spec.checkpoint.uri) and
	// checkpoint (the newest complete checkpoint it saved).
	Outputs map[string]string `json:"outputs,omitempty"`
	// Retries runs a job step whose job fails (or runs over its timeout) again, as a
	// new job <pipeline>-<step>-r<N>, up to count more times, after a backoff; the
	// step fails once every try has.
	Retries *StepRetries `json:"retries,omitempty"`
	// Timeout bounds each try of a job step, from its job's start: a job still running
	// then is stopped, and the try fails with reason StepTimeout.
	Timeout *Duration `json:"timeout,omitempty"`
	// WithItems fans a job step out over a literal list (1 to 64 items: strings,
	// numbers, booleans or objects): each item runs one child job
	// <pipeline>-<step>-<i>, in which ${item} is the item (an object as JSON) and
	// ${item.<key>} an object item's field. Not with withParam.
	WithItems []any `json:"withItems,omitempty" jsonschema:"maxItems=64"`
	// WithParam fans a job step out over a JSON list (1 to 64 items) held by an
	// earlier step's output or a parameter: exactly one reference,
	// ${steps.<step>.outputs.<key>} or ${params.<name>}, resolved when the step
	// starts. Not with withItems.
	WithParam string `json:"withParam,omitempty" jsonschema:"maxLength=1024"`
	// Parallelism bounds how many children of a fan-out step run at once (1 to 64;
	// default all).
	Parallelism int32 `json:"parallelism,omitempty" jsonschema:"minimum=0,maximum=64"`
}

// StepCondition is a condition step's test.
type StepCondition struct {
	// Expression compares numbers: operands are numbers, ${params.<name>} (whose value
	// must be a number) and ${steps.<step>.metrics.<key>} (the last value the step's job
	// reported), with or without the ${ }; operators <, <=, >, >=, ==, !=; comparisons
	// joined with && and || (&& binds tighter; no parentheses). Example:
	// steps.evaluate.metrics.accuracy > params.currentAccuracy.
	Expression string `json:"expression" jsonschema:"maxLength=1024"`
}

// PipelinePhase is where a pipeline run is in its life cycle.
type PipelinePhase string

// Pipeline phases. Succeeded, Failed and Stopped are terminal.
const (
	PipelinePending   PipelinePhase = "Pending"
	PipelineRunning   PipelinePhase = "Running"
	PipelineSucceeded PipelinePhase = "Succeeded"
	PipelineFailed    PipelinePhase = "Failed"
	PipelineStopped   PipelinePhase = "Stopped"
)

// Terminal reports whether the phase is final.
func (p PipelinePhase) Terminal() bool {
	return p == PipelineSucceeded || p == PipelineFailed || p == PipelineStopped
}

// StepPhase is where one step of a pipeline run is.
type StepPhase string

// Step phases. Every phase but Pending and Running is terminal.
const (
	// StepPending: waiting for the steps it depends on.
	StepPending StepPhase = "Pending"
	// StepRunning: its job runs.
	StepRunning StepPhase = "Running"
	// StepSucceeded: its job succeeded, or its condition was evaluated (see
	// StepStatus.ConditionResult).
	StepSucceeded StepPhase = "Succeeded"
	// StepFailed: its job failed or was stopped from outside, or it could not be
	// started or evaluated. The pipeline fails.
	StepFailed StepPhase = "Failed"
	// StepSkipped: it never ran: a step it depends on did not succeed, or a condition
	// it depends on was false, or the pipeline ended first.
	StepSkipped StepPhase = "Skipped"
	// StepCancelled: its job was stopped because the pipeline failed or was stopped.
	StepCancelled StepPhase = "Cancelled"
)

// Terminal reports whether the step is finished.
func (p StepPhase) Terminal() bool { return p != StepPending && p != StepRunning && p != "" }

// StepStatus is the observed state of one step.
type StepStatus struct {
	Name    string    `json:"name"`
	Phase   StepPhase `json:"phase"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	// Job is the name of the step's job (job steps).
	Job string `json:"job,omitempty"`
	// JobUID is the job's uid, once started.
	JobUID string `json:"jobUID,omitempty"`
	// Experiment is the name of an experiment step's Experiment.
	Experiment string `json:"experiment,omitempty"`
	// ConditionResult is a condition step's value, once evaluated.
	ConditionResult *bool `json:"conditionResult,omitempty"`
	// Outputs are the step's outputs, once it succeeded.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Attempts counts the step's tries after the first (retries); Job names the
	// latest try's job.
	Attempts int `json:"attempts,omitempty"`
	// ReusedFrom names, on a retry, the run in which the step succeeded: it was not
	// run again, and its outputs and metrics are that run's.
	ReusedFrom string `json:"reusedFrom,omitempty"`
	// OnExit marks a step of spec.onExit.
	OnExit bool `json:"onExit,omitempty"`
	// Children are a fan-out step's child jobs, one per item, in item order.
	Children []StepChild `json:"children,omitempty"`
	// Metrics are the last values its job reported, once it succeeded.
	Metrics    events.Metrics `json:"metrics,omitempty"`
	StartTime  *time.Time     `json:"startTime,omitempty"`
	FinishTime *time.Time     `json:"finishTime,omitempty"`
}

// StepChild is one child job of a fan-out step (withItems, withParam).
type StepChild struct {
	// Index is the item's index in the list, from 0.
	Index int `json:"index"`
	// Job is the child's job, <pipeline>-<step>-<index>.
	Job string `json:"job"`
	// JobUID is the job's uid, once started.
	JobUID string `json:"jobUID,omitempty"`
	// Phase is Pending (not started yet), Running, Succeeded, Failed, Cancelled
	// (stopped because a sibling failed or the pipeline ended) or Skipped (never
	// started for the same reasons).
	Phase   StepPhase `json:"phase"`
	Message string    `json:"message,omitempty"`
}

// PipelineStatus is what the Pipeline workflow reports through its status query.
type PipelineStatus struct {
	Phase   PipelinePhase `json:"phase"`
	Reason  string        `json:"reason,omitempty"`
	Message string        `json:"message,omitempty"`
	// Params are the values the run uses, defaults included.
	Params     map[string]string `json:"params,omitempty"`
	Steps      []StepStatus      `json:"steps,omitempty"`
	StartTime  *time.Time        `json:"startTime,omitempty"`
	FinishTime *time.Time        `json:"finishTime,omitempty"`
}

// Step returns the status of the named step, or nil.
func (s *PipelineStatus) Step(name string) *StepStatus {
	for i := range s.Steps {
		if s.Steps[i].Name == name {
			return &s.Steps[i]
		}
	}
	return nil
}

// Built-in outputs of every job step.
const (
	// OutputJob is the name of the step's job.
	OutputJob = "job"
	// OutputCheckpointURI is the step's spec.checkpoint.uri, after substitution.
	OutputCheckpointURI = "checkpointURI"
	// OutputCheckpoint is the newest complete checkpoint the step's job saved
	// (s3://bucket/prefix/<step>).
	OutputCheckpoint = "checkpoint"
)

var builtinOutputs = []string{OutputCheckpoint, OutputCheckpointURI, OutputJob}

var _ Object = (*Pipeline)(nil)

// GetKind returns KindPipeline.
func (p *Pipeline) GetKind() Kind { return KindPipeline }

// GetMeta returns the pipeline's metadata.
func (p *Pipeline) GetMeta() *ObjectMeta { return &p.Metadata }

// Default fills in the workspace. The steps' jobs get their defaults when the pipeline
// workflow creates them.
func (p *Pipeline) Default() {
	if p.Metadata.Workspace == "" {
		p.Metadata.Workspace = DefaultWorkspace
	}
}

// StepJobName is the name of the job that runs step of pipeline run.
func StepJobName(run, step string) string { return run + "-" + step }

// Step returns the named step and its index, or nil and -1.
func (s *PipelineSpec) Step(name string) (*PipelineStep, int) {
	for i := range s.Steps {
		if s.Steps[i].Name == name {
			return &s.Steps[i], i
		}
	}
	return nil, -1
}

// ResolveParams returns every parameter's value for a run: given values, then defaults.
// It reports, with field paths under "params", given values the pipeline does not
// declare and required parameters that are missing.
func (s *PipelineSpec) ResolveParams(given map[string]string) (map[string]string, ErrorList) {
	var errs ErrorList
	out := make(map[string]string, len(s.Params))
	declared := make(map[string]bool, len(s.Params))
	p := NewPath("params")
	for _, prm := range s.Params {
		declared[prm.Name] = true
		if v, ok := given[prm.Name]; ok {
			out[prm.Name] = v
		} else if prm.Default != nil {
			out[prm.Name] = *prm.Default
		} else {
			errs = append(errs, Invalid(p.Key(prm.Name), "required: the pipeline declares it without a default"))
		}
	}
	for _, k := range sortedKeys(given) {
		if !declared[k] {
			errs = append(errs, Invalid(p.Key(k), "not a parameter of the pipeline"))
		}
	}
	errs.Sort()
	return out, errs
}

// JSONSchemaExtend pins apiVersion and kind.
func (Pipeline) JSONSchemaExtend(s *jsonschema.Schema) {
	pinKind(s, KindPipeline)
}

// JSONSchemaExtend says that a step sets exactly one of job and condition, and bounds
// its outputs.
func (PipelineStep) JSONSchemaExtend(s *jsonschema.Schema) {
	s.OneOf = []*jsonschema.Schema{
		{Required: []string{"job"}},
		{Required: []string{"condition"}},
		{Required: []string{"experiment"}},
	}
	if o, ok := s.Properties.Get("outputs"); ok {
		o.MaxProperties = uint64p(maxStepOutputs)
		o.PropertyNames = &jsonschema.Schema{Type: "string", MaxLength: uint64p(64), Pattern: outputKeyPattern}
		o.AdditionalProperties = &jsonschema.Schema{Type: "string", MaxLength: uint64p(1024)}
	}
}

// DecodePipeline is Decode for a document that must be a Pipeline.
func DecodePipeline(data []byte) (*Pipeline, error) {
	return decodeAs[Pipeline](data, KindPipeline)
}
