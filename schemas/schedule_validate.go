package schemas

import (
	"reflect"
	"strings"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/opendlc/opendlc/schedule"
)

// Labels and annotations the schedule puts on the jobs it starts.
const (
	// LabelSchedule names the schedule that started a job; list a schedule's jobs with
	// `dlc job list -l opendlc.io/schedule=NAME`.
	LabelSchedule = "opendlc.io/schedule"
	// AnnotationNominalTime is the run's nominal time (RFC 3339, UTC).
	AnnotationNominalTime = "opendlc.io/nominal-time"
	// AnnotationRunTrigger says why the run happened (Schedule, Catchup, Trigger, Backfill).
	AnnotationRunTrigger = "opendlc.io/run-trigger"
)

// Bounds of a Schedule that its struct tags cannot express.
const (
	// MaxScheduleNameLength leaves room in a job name (at most 50 characters) for '-' and
	// the 14 digits of a run's time.
	MaxScheduleNameLength = 35
	// MaxExperimentScheduleNameLength is shorter: a run's experiment is named like a job
	// and must still fit in MaxExperimentNameLength, which leaves room for its trial
	// jobs' -t<N>-r<K>.
	MaxExperimentScheduleNameLength = MaxExperimentNameLength - runNameSuffixLength
	// runNameSuffixLength is the longest suffix of a run's name: '-' and 14 digits.
	runNameSuffixLength = 15
	// maxPipelineParams and maxPipelineParamLength bound a pipeline template's params as
	// a Pipeline bounds its parameters and their defaults.
	maxPipelineParams      = 32
	maxPipelineParamLength = 4096
	maxScheduleJitter      = Duration(24 * time.Hour)
	minCatchupWindow       = Duration(10 * time.Second)
	maxCatchupWindow       = Duration(365 * 24 * time.Hour)
)

var _ Object = (*Schedule)(nil)

func init() {
	leafMessages[reflect.TypeFor[time.Time]()] = "must be an RFC 3339 time such as 2026-01-02T15:04:05Z or 2026-01-02T02:00:00+08:00"
}

// GetKind returns KindSchedule.
func (s *Schedule) GetKind() Kind { return KindSchedule }

// GetMeta returns the schedule's metadata.
func (s *Schedule) GetMeta() *ObjectMeta { return &s.Metadata }

// Default fills in the workspace, the time zone (UTC), the overlap policy, the catch-up
// window, the history limit and the job or experiment template's own defaults (a
// pipeline's steps get theirs when its run creates their jobs).
func (s *Schedule) Default() {
	if s.Metadata.Workspace == "" {
		s.Metadata.Workspace = DefaultWorkspace
	}
	sp := &s.Spec
	if sp.TimeZone == "" {
		sp.TimeZone = "UTC"
	}
	if sp.OverlapPolicy == "" {
		sp.OverlapPolicy = DefaultOverlapPolicy
	}
	if sp.CatchupWindow == 0 {
		sp.CatchupWindow = DefaultCatchupWindow
	}
	if sp.HistoryLimit == 0 {
		sp.HistoryLimit = DefaultScheduleHistoryLimit
	}
	if t := sp.Action.JobTemplate; t != nil {
		j := TrainingJob{Metadata: ObjectMeta{Workspace: s.Metadata.Workspace}, Spec: t.Spec}
		j.Default()
		t.Spec = j.Spec
	}
	if t := sp.Action.ExperimentTemplate; t != nil {
		e := Experiment{Metadata: ObjectMeta{Workspace: s.Metadata.Workspace}, Spec: t.Spec}
		e.Default()
		t.Spec = e.Spec
	}
}

// Validate returns every problem with the schedule, sorted by field path, or nil. It does
// not apply defaults, and accepts the empty values that Default would fill in.
func (s *Schedule) Validate() ErrorList {
	var errs ErrorList
	validateHeader(s, s.APIVersion, s.Kind, &errs)
	n := len(s.Metadata.Name)
	switch {
	case n > 50: // reported by the tag
	case n > MaxScheduleNameLength:
		errs = append(errs, Invalid(NewPath("metadata", "name"),
			"must be at most %d characters for a Schedule: run names append '-' and 14 digits", MaxScheduleNameLength))
	case n > MaxExperimentScheduleNameLength && s.Spec.Action.ExperimentTemplate != nil:
		errs = append(errs, Invalid(NewPath("metadata", "name"),
			"must be at most %d characters for a Schedule of experiments: run names append '-' and 14 digits, "+
				"and an experiment's name is at most %d characters", MaxExperimentScheduleNameLength, MaxExperimentNameLength))
	}
	runNameLen := 0 // unknown
	if n > 0 {
		runNameLen = n + runNameSuffixLength
	}
	s.Spec.validate(runNameLen, NewPath("spec"), &errs)

	errs.Sort()
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// validate checks the spec. runNameLen is the longest name of a run (0 when not known),
// which bounds a pipeline template's step names as a Pipeline's name does.
func (s *ScheduleSpec) validate(runNameLen int, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }

	if s.Cron != "" && len(s.Cron) <= 256 {
		if _, err := schedule.Parse(schedule.Spec{Cron: s.Cron}); err != nil {
			add(Invalid(p.Child("cron"), "%s", strings.TrimPrefix(err.Error(), "schedule: ")))
		}
	}
	if s.TimeZone != "" && len(s.TimeZone) <= 64 {
		if _, err := schedule.LoadLocation(s.TimeZone); err != nil {
			add(Invalid(p.Child("timeZone"), "%s", strings.TrimPrefix(err.Error(), "schedule: ")))
		}
	}
	if s.StartTime != nil && s.EndTime != nil && s.EndTime.Before(*s.StartTime) {
		add(Invalid(p.Child("endTime"), "must not be before startTime"))
	}
	if s.Jitter > maxScheduleJitter {
		add(Invalid(p.Child("jitter"), "must be at most %s", maxScheduleJitter.D()))
	}
	if w := s.CatchupWindow; w != 0 && (w < minCatchupWindow || w > maxCatchupWindow) {
		add(Invalid(p.Child("catchupWindow"), "must be between %s and %s", minCatchupWindow.D(), maxCatchupWindow.D()))
	}

	ap := p.Child("action")
	switch set := s.Action.templates(); {
	case len(set) == 0:
		add(Invalid(ap, "must set one of jobTemplate, experimentTemplate, pipelineTemplate, pipelineTemplateRef"))
	case len(set) > 1:
		add(Invalid(ap, "must set exactly one of %s", strings.Join(set, ", ")))
	}
	// Each template is checked as a document of its kind would be, with paths below it.
	if t := s.Action.JobTemplate; t != nil {
		tp := ap.Child("jobTemplate")
		t.Metadata.validate(0, tp.Child("metadata"), errs)
		t.Spec.validate(tp.Child("spec"), errs)
	}
	if t := s.Action.ExperimentTemplate; t != nil {
		tp := ap.Child("experimentTemplate")
		// Trial jobs also get the experiment and trial labels.
		t.Metadata.validate(2, tp.Child("metadata"), errs)
		t.Spec.validate(tp.Child("spec"), errs)
	}
	if t := s.Action.PipelineTemplate; t != nil {
		tp := ap.Child("pipelineTemplate")
		// Step jobs also get the pipeline and step labels.
		t.Metadata.validate(2, tp.Child("metadata"), errs)
		t.Spec.validate(runNameLen, tp.Child("spec"), errs)
		// The run's parameters, checked as `dlc pipeline run -p` checks them.
		_, perrs := t.Spec.ResolveParams(t.Params)
		for _, e := range perrs {
			*errs = append(*errs, &FieldError{Field: tp.String() + "." + e.Field, Detail: e.Detail})
		}
		for _, k := range sortedKeys(t.Params) {
			if len(t.Params[k]) > maxPipelineParamLength {
				add(Invalid(tp.Child("params").Key(k), "must be at most %d characters", maxPipelineParamLength))
			}
		}
	}

	if r := s.Action.PipelineTemplateRef; r != nil {
		// The name is checked by its tags; the params against the template at each run.
		validatePipelineParamValues(r.Params, ap.Child("pipelineTemplateRef").Child("params"), errs)
	}

	rp := p.Child("runOptions")
	if u := s.RunOptions.SkipIfNoNewDataUnder; u != "" && len(u) <= 1024 {
		if !strings.HasPrefix(u, "s3://") {
			add(Invalid(rp.Child("skipIfNoNewDataUnder"), "must be s3://bucket/prefix"))
		} else if msg := validateS3URI(u); msg != "" {
			add(Invalid(rp.Child("skipIfNoNewDataUnder"), "%s", msg))
		}
	}
	if s.RunOptions.ResumeFromPreviousCheckpoint {
		switch {
		case s.Action.JobTemplate != nil && s.Action.JobTemplate.Spec.Checkpoint == nil:
			add(Invalid(rp.Child("resumeFromPreviousCheckpoint"),
				"needs action.jobTemplate.spec.checkpoint: the location the runs checkpoint to"))
		case s.Action.JobTemplate == nil && (s.Action.ExperimentTemplate != nil || s.Action.PipelineTemplate != nil || s.Action.PipelineTemplateRef != nil):
			add(Invalid(rp.Child("resumeFromPreviousCheckpoint"),
				"applies to jobTemplate only: an experiment's or a pipeline's run does not resume from the previous run's checkpoint"))
		}
	}
}

// validate checks a template's labels and annotations. extra is how many labels what
// the run starts adds below it besides opendlc.io/schedule (an experiment's trial jobs,
// a pipeline's step jobs).
func (m *TemplateMeta) validate(extra int, p Path, errs *ErrorList) {
	validateLabels(m.Labels, p.Child("labels"), errs)
	validateAnnotations(m.Annotations, p.Child("annotations"), errs)
	if _, ok := m.Labels[LabelSchedule]; ok {
		*errs = append(*errs, Invalid(p.Child("labels").Key(LabelSchedule), "is set by the schedule"))
	}
	if extra > 0 && len(m.Labels) > maxMapEntries-1-extra {
		*errs = append(*errs, Invalid(p.Child("labels"),
			"must have at most %d entries: the run adds %s, and the jobs it starts %d more", maxMapEntries-1-extra, LabelSchedule, extra))
	}
}

// DecodeSchedule is Decode for a document that must be a Schedule.
func DecodeSchedule(data []byte) (*Schedule, error) {
	return decodeAs[Schedule](data, KindSchedule)
}

// JSONSchemaExtend pins apiVersion and kind, and bounds the name.
func (Schedule) JSONSchemaExtend(s *jsonschema.Schema) {
	pinKind(s, KindSchedule)
	if p, ok := s.Properties.Get("metadata"); ok {
		name := jsonschema.NewProperties()
		name.Set("name", &jsonschema.Schema{MaxLength: uint64p(MaxScheduleNameLength)})
		p.AllOf = append(p.AllOf, &jsonschema.Schema{Properties: name})
	}
}

// JSONSchemaExtend bounds the template's labels and annotations.
func (TemplateMeta) JSONSchemaExtend(s *jsonschema.Schema) {
	labels, _ := s.Properties.Get("labels")
	labelMapSchema(labels, maxLabelValueLength, labelValuePattern)
	annotations, _ := s.Properties.Get("annotations")
	labelMapSchema(annotations, maxAnnotationLength, "")
}

// JSONSchemaExtend says that exactly one template is required.
func (ScheduleAction) JSONSchemaExtend(s *jsonschema.Schema) {
	s.OneOf = []*jsonschema.Schema{
		{Required: []string{"jobTemplate"}},
		{Required: []string{"experimentTemplate"}},
		{Required: []string{"pipelineTemplate"}},
		{Required: []string{"pipelineTemplateRef"}},
	}
}

// JSONSchemaExtend bounds the run's parameters.
func (SchedulePipelineTemplateRef) JSONSchemaExtend(s *jsonschema.Schema) {
	if p, ok := s.Properties.Get("params"); ok {
		pipelineParamsSchema(p)
	}
}

// JSONSchemaExtend bounds the run's parameters.
func (PipelineTemplate) JSONSchemaExtend(s *jsonschema.Schema) {
	if p, ok := s.Properties.Get("params"); ok {
		pipelineParamsSchema(p)
	}
}

// pipelineParamsSchema bounds a map of a pipeline run's parameter values.
func pipelineParamsSchema(p *jsonschema.Schema) {
	p.MaxProperties = uint64p(maxPipelineParams)
	p.PropertyNames = &jsonschema.Schema{Type: "string", MaxLength: uint64p(64), Pattern: envNamePattern}
	p.AdditionalProperties = &jsonschema.Schema{Type: "string", MaxLength: uint64p(maxPipelineParamLength)}
}

// validatePipelineParamValues checks the values of a run's parameters that are known
// before the pipeline is (a stored template's, checked against it when a run starts):
// how many, their names and their lengths.
func validatePipelineParamValues(params map[string]string, p Path, errs *ErrorList) {
	if len(params) > maxPipelineParams {
		*errs = append(*errs, Invalid(p, "must have at most %d entries", maxPipelineParams))
	}
	for _, k := range sortedKeys(params) {
		if len(k) > 64 || !envNameRE.MatchString(k) {
			*errs = append(*errs, Invalid(p.Key(k), "must be a parameter name (letters, digits and _, not starting with a digit, at most 64 characters)"))
		} else if len(params[k]) > maxPipelineParamLength {
			*errs = append(*errs, Invalid(p.Key(k), "must be at most %d characters", maxPipelineParamLength))
		}
	}
}
