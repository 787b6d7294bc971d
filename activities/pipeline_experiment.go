package activities

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/opendlc/opendlc/schemas"
)

// buildStepExperiment turns an experiment step into its Experiment, named
// <run>-<step>: the trial template's references substituted with resolve, except
// ${params.<name>} of a search-space parameter, which the experiment substitutes per
// trial; labelled with the run and step; defaulted and validated.
func buildStepExperiment(in BuildStepJobInput, resolve func(schemas.TemplateRef) (string, error),
	fail func(string, ...any) (BuildStepJobResult, error),
) (BuildStepJobResult, error) {
	src := in.Step.Experiment
	spec := *src
	spec.SearchSpace = append([]schemas.ParameterSpec(nil), src.SearchSpace...)
	spec.Objectives = append([]schemas.ObjectiveSpec(nil), src.Objectives...)
	spec.TrialTemplate = schemas.CopyJobSpec(&src.TrialTemplate)
	var errs []string
	for _, err := range schemas.SubstituteJob(&spec.TrialTemplate, schemas.NewPath("experiment", "trialTemplate"),
		func(r schemas.TemplateRef) (string, error) {
			if r.Root == schemas.RefParams && src.SearchParam(r.Name) != nil {
				return r.String(), nil
			}
			return resolve(r)
		}) {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fail("step %s: %s", in.Step.Name, strings.Join(errs, "; "))
	}
	name := schemas.StepExperimentName(in.Run.Name, in.Step.Name)
	labels := make(map[string]string, len(in.Run.Labels)+2)
	maps.Copy(labels, in.Run.Labels)
	labels[schemas.LabelPipeline] = in.Run.Name
	labels[schemas.LabelPipelineStep] = in.Step.Name
	exp := schemas.Experiment{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindExperiment,
		Metadata:   schemas.ObjectMeta{Name: name, Workspace: in.Run.Workspace, Labels: labels},
		Spec:       spec,
	}
	exp.Default()
	if verrs := exp.Validate(); len(verrs) > 0 {
		msgs := make([]string, len(verrs))
		for i, e := range verrs {
			msgs[i] = e.Error()
		}
		return fail("step %s: the experiment is invalid once its references are substituted: %s", in.Step.Name, strings.Join(msgs, "; "))
	}
	outputs := map[string]string{schemas.OutputExperiment: name}
	kw := make([]string, 0, len(labels))
	for k, v := range labels {
		kw = append(kw, k+"="+v)
	}
	sort.Strings(kw)
	return BuildStepJobResult{Experiment: &exp, Outputs: outputs, LabelKeywords: kw}, nil
}

// BestTrialCheckpointURI is where the best trial's job saved its checkpoints: the
// experiment's checkpoint URI with the job's name appended (schemas.Experiment.TrialJob).
func BestTrialCheckpointURI(exp *schemas.Experiment, job string) string {
	if exp.Spec.TrialTemplate.Checkpoint == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s", strings.TrimRight(exp.Spec.TrialTemplate.Checkpoint.URI, "/"), job)
}
