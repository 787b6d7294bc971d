package schemas

import (
	"strings"
	"time"
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

	sources := 0
	for _, set := range []bool{s.Subject != "", s.Events != nil, s.Webhook != nil} {
		if set {
			sources++
		}
	}
	switch {
	case sources == 0:
		add(Invalid(p.Child("subject"), "required unless events or webhook is set: the trigger needs a source"))
	case sources > 1:
		add(Invalid(p, "must set only one of subject, events and webhook"))
	}
	if e := s.Events; e != nil {
		mp := p.Child("events", "match")
		validateLabels(e.Match.Labels, mp.Child("labels"), &errs)
		validateUnique(e.Match.Types, mp.Child("types"), &errs)
		validateUnique(e.Match.Phases, mp.Child("phases"), &errs)
		validateUnique(e.Match.Jobs, mp.Child("jobs"), &errs)
	}
	if w := s.Webhook; w != nil {
		wp := p.Child("webhook")
		switch {
		case w.Secret == "" && w.SecretRef == nil:
			add(Invalid(wp.Child("secret"), "required unless secretRef is set: every webhook request is signed"))
		case w.Secret != "" && w.SecretRef != nil:
			add(Invalid(wp.Child("secretRef"), "must not be set together with secret"))
		}
	}
	validateTriggerControls(s, p, &errs)
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
		set := 0
		for _, on := range []bool{f.Equals != "", f.Prefix != "", f.Exists != nil} {
			if on {
				set++
			}
		}
		switch {
		case set == 0:
			add(Invalid(fp, "must set equals, prefix or exists"))
		case set > 1 && f.Exists == nil:
			add(Invalid(fp, "must set only one of equals and prefix"))
		case set > 1:
			add(Invalid(fp, "must set only one of equals, prefix and exists"))
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
		if s.Debounce.D() > 0 {
			// A debounced run also gets the implicit params its pipeline declares.
			for _, pp := range a.Pipeline.Params {
				if pp.Name == ParamEvents || pp.Name == ParamEventCount {
					given[pp.Name] = ""
				}
			}
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
				case s.Debounce.D() > 0 && (r.Name == ParamEvents || r.Name == ParamEventCount):
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

// Bounds of a trigger's controls.
const (
	maxTriggerDebounce   = Duration(time.Hour)
	maxTriggerRatePeriod = Duration(24 * time.Hour)
)

// validateTriggerControls checks debounce, rateLimit, maxConcurrentRuns and overflow.
func validateTriggerControls(s *TriggerSpec, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if d := s.Debounce; d != 0 && (d < Duration(time.Second) || d > maxTriggerDebounce) {
		add(Invalid(p.Child("debounce"), "must be from 1s to 1h"))
	}
	if r := s.RateLimit; r != nil && (r.Period < Duration(time.Second) || r.Period > maxTriggerRatePeriod) {
		add(Invalid(p.Child("rateLimit", "period"), "must be from 1s to 24h"))
	}
	if s.Overflow != "" && s.RateLimit == nil && s.MaxConcurrentRuns == 0 {
		add(Invalid(p.Child("overflow"), "applies only with rateLimit or maxConcurrentRuns"))
	}
	if s.Debounce > 0 {
		for _, k := range []string{ParamEvents, ParamEventCount} {
			if hasKey(s.Params, k) {
				add(Invalid(p.Child("params").Key(k), "is set by the trigger for a debounced run; choose another name"))
			}
		}
	}
}
