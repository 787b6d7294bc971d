package schemas

import (
	"strings"
)

// Bounds of a Trigger that its struct tags cannot express.
const (
	maxTriggerParams      = 32
	maxTriggerParamLength = 4096
)

// Validate returns every problem with the trigger, sorted by field path, or nil.
func (t *Trigger) Validate() ErrorList {
	var errs ErrorList
	add := func(e *FieldError) { errs = append(errs, e) }
	validateHeader(t, t.APIVersion, t.Kind, &errs)
	if len(t.Metadata.Labels) > maxMapEntries-3 {
		add(Invalid(NewPath("metadata", "labels"), "must have at most %d entries: what the trigger starts also gets %s, %s and %s",
			maxMapEntries-3, LabelTrigger, LabelPipeline, LabelPipelineStep))
	}
	ws := t.Metadata.Workspace
	if ws == "" {
		ws = DefaultWorkspace
	}
	p := NewPath("spec")
	s := &t.Spec

	if s.Subject != "" && natsSubjectRE.MatchString(s.Subject) {
		name, ok := strings.CutPrefix(s.Subject, TriggerSubjectPrefix(ws))
		if !ok {
			name, ok = strings.CutPrefix(s.Subject, S3SubjectPrefix(ws))
		}
		if !ok || name == "" || strings.Contains(name, ".") {
			add(Invalid(p.Child("subject"), "must be %s<name> or %s<name> (one token after the prefix)",
				TriggerSubjectPrefix(ws), S3SubjectPrefix(ws)))
		}
	}
	for i, f := range s.Filter {
		fp := p.Child("filter").Index(i)
		if f.Field != "" {
			if _, err := ParseFieldPath(f.Field); err != nil {
				add(Invalid(fp.Child("field"), "%v", err))
			}
		}
		switch {
		case f.Equals == "" && f.Prefix == "":
			add(Invalid(fp, "must set equals or prefix"))
		case f.Equals != "" && f.Prefix != "":
			add(Invalid(fp, "must set only one of equals and prefix"))
		}
	}

	pp := p.Child("params")
	if len(s.Params) > maxTriggerParams {
		add(Invalid(pp, "must have at most %d entries", maxTriggerParams))
	}
	for _, k := range sortedKeys(s.Params) {
		kp := pp.Key(k)
		if len(k) > 64 || !envNameRE.MatchString(k) {
			add(Invalid(kp, "parameter name must be at most 64 letters, digits and '_', not starting with a digit"))
		}
		v := s.Params[k]
		if len(v) > maxTriggerParamLength {
			add(Invalid(kp, "must be at most %d characters", maxTriggerParamLength))
			continue
		}
		refs, err := ParseTemplate(v)
		if err != nil {
			add(Invalid(kp, "%v", err))
			continue
		}
		for _, r := range refs {
			if r.Root != RefEvent {
				add(Invalid(kp, "%s: only ${event.<path>} can be used in a trigger's params", r))
			}
		}
	}

	ap := p.Child("action")
	// What the trigger starts is named <trigger>-<hash>; a pipeline's steps add -<step>.
	runNameLen := 0
	if t.Metadata.Name != "" {
		runNameLen = len(t.Metadata.Name) + 1 + runHashLength
		if runNameLen > maxJobNameLength {
			add(Invalid(NewPath("metadata", "name"), "must be at most %d characters: what the trigger starts is named <name>-<%d hex digits>",
				maxJobNameLength-1-runHashLength, runHashLength))
		}
	}
	switch a := &s.Action; {
	case a.PipelineTemplateRef != nil:
		if a.Pipeline != nil || a.Job != nil || a.Experiment != nil {
			add(Invalid(ap, "must set only one of pipeline, pipelineTemplateRef, job and experiment"))
		}
		a.PipelineTemplateRef.validate(ap.Child("pipelineTemplateRef"), &errs)
	case a.Pipeline == nil && a.Job == nil && a.Experiment == nil:
		add(Invalid(ap, "must set pipeline, job or experiment"))
	case (a.Pipeline != nil) && (a.Job != nil) || (a.Pipeline != nil || a.Job != nil) && a.Experiment != nil:
		add(Invalid(ap, "must set only one of pipeline, job and experiment"))
	case a.Experiment != nil:
		s.validateExperiment(t.Metadata, runNameLen, ap.Child("experiment"), &errs)
	case a.Pipeline != nil:
		a.Pipeline.validate(runNameLen, ap.Child("pipeline"), &errs)
		given := map[string]string{}
		for _, k := range sortedKeys(s.Params) {
			given[k] = ""
		}
		if _, perrs := a.Pipeline.ResolveParams(given); len(perrs) > 0 {
			for _, e := range perrs {
				name := strings.TrimPrefix(e.Field, "params.")
				if strings.HasPrefix(e.Detail, "required") {
					add(Invalid(pp, "must give the pipeline's parameter %q, which has no default", name))
				} else {
					add(Invalid(pp.Key(name), "the pipeline has no parameter %q", name))
				}
			}
		}
	case a.Job != nil:
		jp := ap.Child("job")
		a.Job.validate(jp, &errs)
		c := CopyJobSpec(a.Job)
		JobTemplateFields(&c, jp, func(fp Path, v *string) {
			refs, err := ParseTemplate(*v)
			if err != nil {
				add(Invalid(fp, "%v", err))
				return
			}
			for _, r := range refs {
				switch {
				case r.Root != RefParams:
					add(Invalid(fp, "%s: a trigger's job can refer only to ${params.<name>}", r))
				case !hasKey(s.Params, r.Name):
					add(Invalid(fp, "%s: no parameter %q in spec.params", r, r.Name))
				}
			}
		})
	}

	errs.Sort()
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
