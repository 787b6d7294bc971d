package schemas

import (
	"slices"
)

// A trigger whose action is an experiment starts one Experiment per event. Its trial
// template may refer to the trigger's params as ${params.<name>}, like a job action;
// those references are replaced when the experiment starts, and the references to the
// search space's parameters stay, to be replaced in each trial. A trigger param may
// therefore not have a search-space parameter's name.

// TriggerExperimentSpec returns a copy of spec with every ${params.<name>} of its trial
// template whose name is one of params replaced by that value (SubstituteJob: inline
// shell scripts get an environment variable instead); the search space's references
// are left for the trials. p is the spec's path, for the errors.
func TriggerExperimentSpec(spec *ExperimentSpec, params map[string]string, p Path) (ExperimentSpec, []error) {
	out := *spec
	out.TrialTemplate = CopyJobSpec(&spec.TrialTemplate)
	errs := SubstituteJob(&out.TrialTemplate, p.Child("trialTemplate"), func(r TemplateRef) (string, error) {
		if v, ok := params[r.Name]; ok && r.Root == RefParams {
			return v, nil
		}
		return r.String(), nil
	})
	return out, errs
}

// validateExperiment checks an experiment action: its name fits (runNameLen, the
// length of what the trigger starts), no trigger param shadows a search-space
// parameter, and the experiment the trigger would start, its params substituted, is
// valid.
func (s *TriggerSpec) validateExperiment(meta ObjectMeta, runNameLen int, ep Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if runNameLen > MaxExperimentNameLength {
		add(Invalid(NewPath("metadata", "name"), "must be at most %d characters: the experiment the trigger starts is named <name>-<%d hex digits>",
			MaxExperimentNameLength-1-runHashLength, runHashLength))
	}
	space := make([]string, 0, len(s.Action.Experiment.SearchSpace))
	for _, ps := range s.Action.Experiment.SearchSpace {
		space = append(space, ps.Name)
	}
	given := map[string]string{}
	for _, k := range sortedKeys(s.Params) {
		if slices.Contains(space, k) {
			add(Invalid(NewPath("spec", "params").Key(k), "is a parameter of the experiment's search space: "+
				"${params.%s} in the trial template is the trial's value, so a trigger param may not have that name", k))
			continue
		}
		given[k] = "x"
	}
	spec, serrs := TriggerExperimentSpec(s.Action.Experiment, given, ep)
	for _, err := range serrs {
		add(Invalid(ep, "%v", err))
	}
	exp := Experiment{APIVersion: APIVersion, Kind: KindExperiment,
		Metadata: ObjectMeta{Name: "x", Workspace: meta.Workspace}, Spec: spec}
	exp.Default()
	for _, e := range exp.Validate() {
		// Errors of the substituted copy name the same fields as the template's.
		if rest, ok := cutPathPrefix(e.Field, "spec"); ok {
			e.Field = ep.String() + rest
		}
		add(e)
	}
}

// cutPathPrefix returns field without its first element prefix ("spec.x" → ".x").
func cutPathPrefix(field, prefix string) (string, bool) {
	if field == prefix {
		return "", true
	}
	if len(field) > len(prefix) && field[:len(prefix)] == prefix && (field[len(prefix)] == '.' || field[len(prefix)] == '[') {
		return field[len(prefix):], true
	}
	return "", false
}
