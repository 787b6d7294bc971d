package schemas

import "slices"

// spec.onExit: steps that run once every step of spec.steps has ended, whatever the
// outcome, with the outcome as ${pipeline.status}, ${pipeline.failedStep} and
// ${pipeline.message} (docs/pipelines.md, "On exit").

// MaxOnExitSteps bounds spec.onExit.
const MaxOnExitSteps = 8

// References to a run's outcome, ${pipeline.<name>}, which only onExit steps have.
const (
	// PipelineRefStatus is the phase the run's steps gave it: Succeeded, Failed or
	// Stopped.
	PipelineRefStatus = "status"
	// PipelineRefFailedStep is the step whose failure failed the run, or "".
	PipelineRefFailedStep = "failedStep"
	// PipelineRefMessage says why the run ended so: the failed step's message, the
	// stop's reason, or how many steps succeeded.
	PipelineRefMessage = "message"
)

var exitRefs = []string{PipelineRefFailedStep, PipelineRefMessage, PipelineRefStatus}

// AllSteps returns spec.steps then spec.onExit, in one list: the onExit step k is at
// len(spec.steps)+k.
func (s *PipelineSpec) AllSteps() []PipelineStep {
	if len(s.OnExit) == 0 {
		return s.Steps
	}
	return append(slices.Clone(s.Steps), s.OnExit...)
}

// validateOnExit checks spec.onExit: each step as a step of spec.steps, with names
// unique across both lists and dependsOn naming onExit steps only; its references may
// name any step of spec.steps (every one has ended), upstream onExit steps, and the
// run's outcome.
func (s *PipelineSpec) validateOnExit(mainIndex map[string]int, mainAcyclic bool, runNameLen int, params map[string]bool, p Path, errs *ErrorList) {
	if len(s.OnExit) == 0 {
		return
	}
	ep := p.Child("onExit")
	if len(s.OnExit) > MaxOnExitSteps {
		*errs = append(*errs, Invalid(ep, "must have at most %d items", MaxOnExitSteps))
	}
	index, acyclic := validateStepList(s.OnExit, ep, mainIndex, runNameLen, params, errs)
	if !acyclic || !mainAcyclic {
		return
	}
	exitUp := (&PipelineSpec{Steps: s.OnExit}).upstream(index)
	all := &PipelineSpec{Params: s.Params, Steps: s.AllSteps()}
	allIndex := make(map[string]int, len(all.Steps))
	for i, st := range all.Steps {
		if _, ok := allIndex[st.Name]; !ok && st.Name != "" {
			allIndex[st.Name] = i
		}
	}
	for k := range s.OnExit {
		up := make(map[string]bool, len(all.Steps))
		for _, m := range s.Steps {
			up[m.Name] = true
		}
		for _, e := range s.OnExit {
			if exitUp[k][e.Name] {
				up[e.Name] = true
			}
		}
		all.validateRefs(len(s.Steps)+k, params, allIndex, up, true, ep.Index(k), errs)
	}
}
