package schemas

import (
	"regexp"
	"slices"
	"strings"
)

// An experiment step runs a hyper-parameter search (an Experiment, named
// <pipeline>-<step>) and passes its best trial on: the best parameters, the objective,
// the best trial's id and job, and the best trial's newest complete checkpoint.

// Outputs of an experiment step (docs/pipelines.md).
const (
	// OutputExperiment is the name of the step's Experiment.
	OutputExperiment = "experiment"
	// OutputBestTrial is the best trial's id.
	OutputBestTrial = "bestTrial"
	// OutputBestJob is the name of the best trial's (latest) job.
	OutputBestJob = "bestJob"
	// OutputObjective is the best trial's objective value.
	OutputObjective = "objective"
	// OutputBestParamsPrefix prefixes one output per search-space parameter:
	// bestParams.<name> is the best trial's value of parameter <name>.
	OutputBestParamsPrefix = "bestParams."
)

// experimentOutputs are the outputs every experiment step has; checkpoint and
// checkpointURI need trialTemplate.checkpoint, bestParams.<name> a search-space
// parameter <name>.
var experimentOutputs = []string{OutputBestJob, OutputBestTrial, OutputExperiment, OutputObjective}

// StepExperimentName is the name of the Experiment that runs an experiment step.
func StepExperimentName(run, step string) string { return StepJobName(run, step) }

// SearchParam returns the search-space parameter of an experiment step named name, or
// nil.
func (s *ExperimentSpec) SearchParam(name string) *ParameterSpec {
	for i := range s.SearchSpace {
		if s.SearchSpace[i].Name == name {
			return &s.SearchSpace[i]
		}
	}
	return nil
}

// validateExperimentStep checks an experiment step: the search itself (as an
// Experiment's spec, where ${params.<name>} may also name a pipeline parameter), a
// single objective (the outputs are the best trial's), no search-space parameter named
// like a pipeline parameter, and a name that fits an experiment's.
func (st *PipelineStep) validateExperimentStep(runNameLen int, params map[string]bool, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	e := st.Experiment
	ep := p.Child("experiment")
	pipelineParams := sortedKeys(params)
	var sub ErrorList
	e.validateWith(ep, pipelineParams, &sub)
	// An objective left empty because objectives replace it is reported below.
	for _, fe := range sub {
		if len(e.Objectives) > 0 && strings.HasPrefix(fe.Field, ep.Child("objective").String()+".") {
			continue
		}
		add(fe)
	}
	if len(e.Objectives) > 0 {
		add(Invalid(ep.Child("objectives"), "an experiment step needs a single objective: its outputs are the best trial's"))
	}
	for i, ps := range e.SearchSpace {
		if params[ps.Name] {
			add(Invalid(ep.Child("searchSpace").Index(i).Child("name"),
				"%q is also a pipeline parameter: ${params.%s} would be ambiguous; rename one", ps.Name, ps.Name))
		}
	}
	if runNameLen > 0 && st.Name != "" && runNameLen+1+len(st.Name) > MaxExperimentNameLength {
		add(Invalid(p.Child("name"), "the step's experiment name <pipeline>-%s would be longer than %d characters; "+
			"shorten the pipeline's or the step's name", st.Name, MaxExperimentNameLength))
	}
	if len(st.Outputs) > 0 {
		add(Invalid(p.Child("outputs"), "an experiment step's outputs are its best trial's; it declares none"))
	}
}

// checkExperimentRef checks a reference to an output or metric of experiment step src;
// it returns the problem, or "".
func checkExperimentRef(src *PipelineStep, ref TemplateRef) (problem string, args []any) {
	e := src.Experiment
	if ref.Field == StepMetrics {
		if ref.Key != e.Objective.Metric {
			return "step %s is an experiment: its only metric is its objective %q", []any{ref.Name, e.Objective.Metric}
		}
		return "", nil
	}
	switch k := ref.Key; {
	case slices.Contains(experimentOutputs, k):
	case k == OutputCheckpoint || k == OutputCheckpointURI:
		if e.TrialTemplate.Checkpoint == nil {
			return "step %s has no trialTemplate.checkpoint", []any{ref.Name}
		}
	case strings.HasPrefix(k, OutputBestParamsPrefix):
		if e.SearchParam(strings.TrimPrefix(k, OutputBestParamsPrefix)) == nil {
			return "step %s has no search-space parameter %q", []any{ref.Name, strings.TrimPrefix(k, OutputBestParamsPrefix)}
		}
	default:
		return "step %s is an experiment: it has no output %q (it has experiment, bestTrial, bestJob, objective, " +
			"bestParams.<name>, and with trialTemplate.checkpoint checkpoint and checkpointURI)", []any{ref.Name, k}
	}
	return "", nil
}

var searchParamRE = regexp.MustCompile(paramNamePattern)

// isBestParamsKey reports whether an output key is bestParams.<name> with <name> a
// valid search-space parameter name (an experiment step's output).
func isBestParamsKey(key string) bool {
	name, ok := strings.CutPrefix(key, OutputBestParamsPrefix)
	return ok && searchParamRE.MatchString(name)
}

// kinds counts how many of job, experiment and condition the step sets.
func (st *PipelineStep) kinds() int {
	n := 0
	if st.Job != nil {
		n++
	}
	if st.Experiment != nil {
		n++
	}
	if st.Condition != nil {
		n++
	}
	return n
}

// templateResumeFrom stands in for a checkpoint.resumeFrom that is a template (such as
// ${steps.tune.outputs.checkpoint}) while the job spec is validated: the value it
// takes is checked when the step's job is built.
const templateResumeFrom = "s3://template/resume-from/0"

// validateStepJob validates a job step's spec, whose checkpoint.resumeFrom may be a
// template.
func validateStepJob(spec *TrainingJobSpec, p Path, errs *ErrorList) {
	if ck := spec.Checkpoint; ck != nil && strings.Contains(ck.ResumeFrom, "${") {
		c := *spec
		cc := *ck
		cc.ResumeFrom = templateResumeFrom
		c.Checkpoint = &cc
		spec = &c
	}
	spec.validate(p, errs)
}
