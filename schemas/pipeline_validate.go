package schemas

import (
	"regexp"
	"slices"
	"strings"
)

// Patterns of a Pipeline's jsonschema tags and outputs; TestPipelinePatternTags keeps
// the tags and these constants in step.
const (
	// outputKeyPattern is an output's key. Parameter names use envNamePattern.
	outputKeyPattern = `^[A-Za-z][A-Za-z0-9_]*$`
)

// Bounds of a Pipeline that its struct tags cannot express.
const (
	maxStepOutputs     = 16
	maxOutputURILength = 1024
)

var outputKeyRE = regexp.MustCompile(outputKeyPattern)

// Validate returns every problem with the pipeline, sorted by field path, or nil.
func (p *Pipeline) Validate() ErrorList {
	var errs ErrorList
	validateHeader(p, p.APIVersion, p.Kind, &errs)
	if len(p.Metadata.Labels) > maxMapEntries-2 {
		errs = append(errs, Invalid(NewPath("metadata", "labels"),
			"must have at most %d entries: each step's job also gets %s and %s", maxMapEntries-2, LabelPipeline, LabelPipelineStep))
	}
	p.Spec.validate(len(p.Metadata.Name), NewPath("spec"), &errs)
	errs.Sort()
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// validate checks the steps and parameters. runNameLen is the length of the run's name
// (0 when not known yet), which bounds the steps' names: a step's job is named
// <run>-<step>.
func (s *PipelineSpec) validate(runNameLen int, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }

	params := map[string]bool{}
	for i, prm := range s.Params {
		if prm.Name == "" {
			continue
		}
		if params[prm.Name] {
			add(Invalid(p.Child("params").Index(i).Child("name"), "duplicate parameter %q", prm.Name))
		}
		params[prm.Name] = true
	}

	index, acyclic := validateStepList(s.Steps, p.Child("steps"), nil, runNameLen, params, errs)
	if acyclic {
		up := s.upstream(index)
		for i := range s.Steps {
			s.validateRefs(i, params, index, up[i], false, p.Child("steps").Index(i), errs)
		}
	}
	s.validateOnExit(index, acyclic, runNameLen, params, p, errs)
}

// validateStepList checks a list of steps (spec.steps, or spec.onExit at sp): names
// (unique here and not in other, the names of the other list), dependencies within
// the list, each step's kind and fields, and cycles. It returns the steps' indexes by
// name and whether the list has no cycle.
func validateStepList(list []PipelineStep, sp Path, other map[string]int, runNameLen int, params map[string]bool, errs *ErrorList) (map[string]int, bool) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	index := map[string]int{}
	for i, st := range list {
		if st.Name == "" {
			continue
		}
		if j, ok := index[st.Name]; ok {
			add(Invalid(sp.Index(i).Child("name"), "duplicate name %q (first at %s)", st.Name, sp.Index(j)))
			continue
		}
		if j, ok := other[st.Name]; ok {
			add(Invalid(sp.Index(i).Child("name"), "duplicate name %q (first at spec.steps[%d])", st.Name, j))
			continue
		}
		index[st.Name] = i
		if runNameLen > 0 && runNameLen+1+len(st.Name) > maxJobNameLength {
			add(Invalid(sp.Index(i).Child("name"), "the step's job name <pipeline>-%s would be longer than %d characters; "+
				"shorten the pipeline's or the step's name", st.Name, maxJobNameLength))
		}
	}

	for i := range list {
		st := &list[i]
		stp := sp.Index(i)
		for k, d := range st.DependsOn {
			dp := stp.Child("dependsOn").Index(k)
			_, ok := index[d]
			_, inOther := other[d]
			switch {
			case d == "":
			case d == st.Name:
				add(Invalid(dp, "a step cannot depend on itself"))
			case !ok && inOther:
				add(Invalid(dp, "an onExit step runs once every step has ended; dependsOn names other onExit steps only"))
			case !ok:
				add(Invalid(dp, "unknown step %q", d))
			}
		}
		validateUnique(st.DependsOn, stp.Child("dependsOn"), errs)
		switch n := st.kinds(); {
		case n == 0:
			add(Invalid(stp, "must set job, experiment or condition"))
		case n > 1:
			add(Invalid(stp, "must set only one of job, experiment and condition"))
		case st.Job != nil:
			validateStepJob(st.Job, stp.Child("job"), errs)
		case st.Experiment != nil:
			st.validateExperimentStep(runNameLen, params, stp, errs)
		}
		if st.Condition != nil && len(st.Outputs) > 0 {
			add(Invalid(stp.Child("outputs"), "only a job step has outputs"))
		}
		validateOutputs(st.Outputs, stp.Child("outputs"), errs)
		st.validateRetries(runNameLen, stp, errs)
		st.validateFanOut(runNameLen, stp, errs)
	}

	l := &PipelineSpec{Steps: list}
	cycles := l.findCycles(index)
	for _, c := range cycles {
		add(Invalid(sp.Index(c.at).Child("dependsOn"), "cycle %s", strings.Join(c.names, " → ")))
	}
	return index, len(cycles) == 0
}

func validateOutputs(outputs map[string]string, p Path, errs *ErrorList) {
	if len(outputs) > maxStepOutputs {
		*errs = append(*errs, Invalid(p, "must have at most %d entries", maxStepOutputs))
	}
	for _, k := range sortedKeys(outputs) {
		kp := p.Key(k)
		switch {
		case len(k) > 64 || !outputKeyRE.MatchString(k):
			*errs = append(*errs, Invalid(kp, "output key must be at most 64 letters, digits and '_', starting with a letter"))
		case slices.Contains(builtinOutputs, k):
			*errs = append(*errs, Invalid(kp, "%q is a built-in output of every job step", k))
		}
		if v := outputs[k]; v == "" {
			*errs = append(*errs, Invalid(kp, "must not be empty"))
		} else if len(v) > maxOutputURILength {
			*errs = append(*errs, Invalid(kp, "must be at most %d characters", maxOutputURILength))
		}
	}
}

type cycle struct {
	at    int      // the step whose dependsOn closes the cycle
	names []string // the cycle, first step repeated at the end
}

// findCycles returns each cycle of the dependency graph once, found by a depth-first
// search in step order.
func (s *PipelineSpec) findCycles(index map[string]int) []cycle {
	const (
		unvisited = iota
		onStack
		done
	)
	state := make([]int, len(s.Steps))
	var stack []int
	var out []cycle
	var visit func(i int)
	visit = func(i int) {
		state[i] = onStack
		stack = append(stack, i)
		for _, d := range s.Steps[i].DependsOn {
			j, ok := index[d]
			if !ok || j == i {
				continue
			}
			switch state[j] {
			case unvisited:
				visit(j)
			case onStack:
				// stack[x] depends on stack[x+1] and i (the top) on j: work flows from j
				// to i, then down the stack back to j.
				k := slices.Index(stack, j)
				names := []string{s.Steps[j].Name}
				for x := len(stack) - 1; x >= k; x-- {
					names = append(names, s.Steps[stack[x]].Name)
				}
				out = append(out, cycle{at: i, names: names})
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
	}
	for i := range s.Steps {
		if state[i] == unvisited {
			visit(i)
		}
	}
	return out
}

// upstream returns, for each step, the set of steps it transitively depends on. The
// graph must have no cycles.
func (s *PipelineSpec) upstream(index map[string]int) []map[string]bool {
	up := make([]map[string]bool, len(s.Steps))
	var visit func(i int) map[string]bool
	visit = func(i int) map[string]bool {
		if up[i] != nil {
			return up[i]
		}
		m := map[string]bool{}
		up[i] = m
		for _, d := range s.Steps[i].DependsOn {
			j, ok := index[d]
			if !ok || j == i {
				continue
			}
			m[d] = true
			for k := range visit(j) {
				m[k] = true
			}
		}
		return m
	}
	for i := range s.Steps {
		visit(i)
	}
	return up
}

// validateRefs checks every reference of step i: parameters must be declared, steps
// must be upstream job steps with the output referred to.
// exit says step i is an onExit step, which may also refer to the run's outcome.
func (s *PipelineSpec) validateRefs(i int, params map[string]bool, index map[string]int, up map[string]bool, exit bool, p Path, errs *ErrorList) {
	st := &s.Steps[i]
	check := func(fp Path, ref TemplateRef) {
		add := func(format string, args ...any) {
			*errs = append(*errs, Invalid(fp, "%s: "+format, append([]any{ref.String()}, args...)...))
		}
		switch ref.Root {
		case RefParams:
			if st.Experiment != nil && (st.Experiment.SearchParam(ref.Name) != nil || !params[ref.Name]) {
				return // the trial's value, or unknown (the experiment's validation says so)
			}
			if !params[ref.Name] {
				add("no parameter %q in spec.params", ref.Name)
			}
		case RefEvent:
			add("event fields are available only in a Trigger's spec.params")
		case RefItem:
			if problem := st.checkItemRef(ref); problem != "" {
				add("%s", problem)
			}
		case RefPipeline:
			if !exit && slices.Contains(exitRefs, ref.Name) {
				add("the run's outcome is known only in spec.onExit steps")
			}
		case RefSteps:
			j, ok := index[ref.Name]
			switch {
			case !ok:
				add("unknown step %q", ref.Name)
				return
			case !up[ref.Name]:
				add("step %s is not upstream of %s; add it to dependsOn", ref.Name, st.Name)
				return
			}
			src := &s.Steps[j]
			if src.Experiment != nil {
				if problem, args := checkExperimentRef(src, ref); problem != "" {
					add(problem, args...)
				}
				return
			}
			if src.Job == nil {
				add("step %s is a condition: it has no outputs or metrics", ref.Name)
				return
			}
			if src.FanOut() {
				if problem := checkFanOutRef(src, ref); problem != "" {
					add("%s", problem)
				}
				return
			}
			if ref.Field != StepOutputs {
				return
			}
			switch {
			case ref.Key == OutputJob:
			case ref.Key == OutputCheckpoint || ref.Key == OutputCheckpointURI:
				if src.Job.Checkpoint == nil {
					add("step %s has no spec.checkpoint", ref.Name)
				}
			default:
				if _, ok := src.Outputs[ref.Key]; !ok {
					add("step %s has no output %q", ref.Name, ref.Key)
				}
			}
		}
	}
	parse := ParseTemplate
	if st.FanOut() {
		parse = ParseItemTemplate // ${item} is a reference only here
	}
	template := func(fp Path, v string) {
		refs, err := parse(v)
		if err != nil {
			*errs = append(*errs, Invalid(fp, "%v", err))
			return
		}
		for _, r := range refs {
			check(fp, r)
		}
	}
	if st.Job != nil {
		c := CopyJobSpec(st.Job)
		JobTemplateFields(&c, p.Child("job"), func(fp Path, v *string) { template(fp, *v) })
	}
	if st.Experiment != nil {
		c := CopyJobSpec(&st.Experiment.TrialTemplate)
		JobTemplateFields(&c, p.Child("experiment", "trialTemplate"), func(fp Path, v *string) { template(fp, *v) })
	}
	for _, k := range sortedKeys(st.Outputs) {
		template(p.Child("outputs").Key(k), st.Outputs[k])
	}
	if st.WithParam != "" {
		if refs, err := ParseTemplate(st.WithParam); err == nil {
			for _, r := range refs {
				check(p.Child("withParam"), r)
			}
		}
	}
	if st.Condition != nil {
		cp := p.Child("condition", "expression")
		cond, err := ParseCondition(st.Condition.Expression)
		if err != nil {
			if st.Condition.Expression != "" {
				*errs = append(*errs, Invalid(cp, "%v", err))
			}
			return
		}
		for _, r := range cond.Refs() {
			check(cp, r)
		}
	}
}

// TopoOrder returns the steps' indexes so that every step comes after the steps it
// depends on, keeping the declared order where the dependencies allow. It assumes a
// valid pipeline (no cycles, no unknown steps).
func (s *PipelineSpec) TopoOrder() []int {
	placed := make([]bool, len(s.Steps))
	out := make([]int, 0, len(s.Steps))
	for len(out) < len(s.Steps) {
		next := -1
		for i, st := range s.Steps {
			if placed[i] {
				continue
			}
			ready := true
			for _, d := range st.DependsOn {
				if _, j := s.Step(d); j >= 0 && j != i && !placed[j] {
					ready = false
					break
				}
			}
			if ready {
				next = i
				break
			}
		}
		if next < 0 {
			break // a cycle: Validate reports it
		}
		placed[next] = true
		out = append(out, next)
	}
	return out
}
