package schemas

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
)

// Patterns of an Experiment's jsonschema tags.
const (
	paramNamePattern  = `^[A-Za-z_][A-Za-z0-9_-]*$`
	metricNamePattern = `^[A-Za-z0-9_.:/-]+$`
)

func init() {
	patternMessages[paramNamePattern] = "must be letters, digits, '_' and '-', not starting with a digit or '-'"
	patternMessages[metricNamePattern] = "must be a metric name: letters, digits, '_', '.', ':', '/' and '-'"
}

// paramRefOpen starts a reference to a parameter in a trial template.
const paramRefOpen = "${params."

// maxGridSize bounds the grid size that validation computes exactly.
const maxGridSize = 1 << 40

var _ Object = (*Experiment)(nil)

// GetKind returns KindExperiment.
func (e *Experiment) GetKind() Kind { return KindExperiment }

// GetMeta returns the experiment's metadata.
func (e *Experiment) GetMeta() *ObjectMeta { return &e.Metadata }

// Default fills in the workspace, the parallelism, the failure limits, the algorithm,
// the early-stopping rule and its settings, the step metric, and the trial template's
// own defaults.
func (e *Experiment) Default() {
	if e.Metadata.Workspace == "" {
		e.Metadata.Workspace = DefaultWorkspace
	}
	s := &e.Spec
	if s.Parallelism == 0 {
		s.Parallelism = DefaultParallelism
	}
	if s.MaxFailedTrials == nil {
		n := int32(DefaultMaxFailedTrials)
		s.MaxFailedTrials = &n
	}
	if s.MaxTrialRetries == nil {
		n := int32(DefaultMaxTrialRetries)
		s.MaxTrialRetries = &n
	}
	if s.Algorithm.Name == "" {
		s.Algorithm.Name = DefaultAlgorithm
		if len(s.Objectives) > 0 {
			s.Algorithm.Name = AlgorithmNSGA2
		}
	}
	if len(s.Objectives) > 0 {
		if s.Objectives[0].StepMetric == "" {
			s.Objectives[0].StepMetric = DefaultStepMetric
		}
	} else if s.Objective.StepMetric == "" {
		s.Objective.StepMetric = DefaultStepMetric
	}
	es := &s.EarlyStopping
	if es.Rule == "" {
		es.Rule = DefaultEarlyStopping
		if s.Algorithm.Name.Hyperband() {
			es.Rule = EarlyStoppingHyperband
		}
	}
	switch es.Rule {
	case EarlyStoppingASHA, EarlyStoppingHyperband:
		if es.MinResource == 0 {
			es.MinResource = 1
		}
		if es.ReductionFactor == 0 {
			es.ReductionFactor = 3
		}
	case EarlyStoppingMedian:
		if es.StartupTrials == nil {
			n := int32(DefaultMedianStartupTrials)
			es.StartupTrials = &n
		}
	}
	job := TrainingJob{Spec: s.TrialTemplate}
	job.Default()
	s.TrialTemplate = job.Spec
}

// Validate returns every problem with the experiment, sorted by field path, or nil. It
// does not apply defaults, and accepts the empty values that Default would fill in.
func (e *Experiment) Validate() ErrorList {
	var errs ErrorList
	validateHeader(e, e.APIVersion, e.Kind, &errs)
	if n := len(e.Metadata.Name); n > MaxExperimentNameLength && n <= 50 {
		errs = append(errs, Invalid(NewPath("metadata", "name"),
			"must be at most %d characters: trial job names add -t<N>-r<K>", MaxExperimentNameLength))
	}
	e.Spec.validate(NewPath("spec"), &errs)
	e.Spec.validateWarmStart(e.Metadata.Name, NewPath("spec"), &errs)
	errs = e.Spec.withoutObjectiveRequired(errs)

	errs.Sort()
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func (s *ExperimentSpec) validate(p Path, errs *ErrorList) { s.validateWith(p, nil, errs) }

// validateWith is validate where ${params.<name>} in the trial template may also name
// one of outer (a pipeline's parameters, for an experiment step).
func (s *ExperimentSpec) validateWith(p Path, outer []string, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }

	names := s.validateSearchSpace(p.Child("searchSpace"), errs)

	o, op := &s.Objective, p.Child("objective")
	if o.StepMetric != "" && o.StepMetric == o.Metric {
		add(Invalid(op.Child("stepMetric"), "must differ from metric"))
	}
	s.validateObjectives(p, errs)
	s.validateAggregate(p, errs)
	s.validateConstraints(p, errs)
	s.validateConditions(p, errs)

	ap := p.Child("algorithm")
	if n := s.Algorithm.StartupTrials; n != nil && (*n < 0 || *n > MaxExperimentTrials) {
		add(Invalid(ap.Child("startupTrials"), "must be between 0 and %d", MaxExperimentTrials))
	}
	s.validateAlgorithm(p, errs)
	s.validatePBT(p, errs)
	if s.Algorithm.Name != "" && s.Algorithm.Name != AlgorithmTPE {
		if s.Algorithm.StartupTrials != nil && !s.Algorithm.Name.Startup() {
			add(Invalid(ap.Child("startupTrials"), "applies to algorithms tpe, gp and bohb only"))
		}
		if s.Algorithm.Multivariate {
			add(Invalid(ap.Child("multivariate"), "applies to algorithm tpe only"))
		}
		if s.Algorithm.ConstantLiar {
			add(Invalid(ap.Child("constantLiar"), "applies to algorithm tpe only"))
		}
	}
	if a := s.Algorithm.Name; a == AlgorithmGrid {
		for i, ps := range s.SearchSpace {
			if ps.Type == ParameterFloat && ps.Step <= 0 {
				add(Invalid(p.Child("searchSpace").Index(i).Child("step"), "required for a float parameter with algorithm grid"))
			}
		}
	}

	es, ep := &s.EarlyStopping, p.Child("earlyStopping")
	if es.ReductionFactor == 1 {
		add(Invalid(ep.Child("reductionFactor"), "must be >= 2 (0 means 3)"))
	}
	if es.Rule != EarlyStoppingASHA && es.Rule != EarlyStoppingHyperband && (es.Rule != "" || !s.Algorithm.Name.Hyperband()) {
		if es.MinResource != 0 {
			add(Invalid(ep.Child("minResource"), "applies to rules asha and hyperband only"))
		}
		if es.ReductionFactor != 0 {
			add(Invalid(ep.Child("reductionFactor"), "applies to rules asha and hyperband only"))
		}
		if es.MaxResource != 0 {
			add(Invalid(ep.Child("maxResource"), "applies to rules asha and hyperband only"))
		}
	} else if es.MaxResource > 0 && es.MaxResource <= max(es.MinResource, 1) {
		add(Invalid(ep.Child("maxResource"), "must be greater than minResource"))
	}
	if es.Rule != EarlyStoppingMedian {
		if es.WarmupSteps != 0 {
			add(Invalid(ep.Child("warmupSteps"), "applies to rule median only"))
		}
		if es.StartupTrials != nil {
			add(Invalid(ep.Child("startupTrials"), "applies to rule median only"))
		}
	} else if n := es.StartupTrials; n != nil && (*n < 0 || *n > MaxExperimentTrials) {
		add(Invalid(ep.Child("startupTrials"), "must be between 0 and %d", MaxExperimentTrials))
	}

	if n := s.MaxFailedTrials; n != nil && (*n < 0 || *n > MaxExperimentTrials) {
		add(Invalid(p.Child("maxFailedTrials"), "must be between 0 and %d", MaxExperimentTrials))
	}
	if n := s.MaxTrialRetries; n != nil && (*n < 0 || *n > MaxTrialRetries) {
		add(Invalid(p.Child("maxTrialRetries"), "must be between 0 and %d", MaxTrialRetries))
	}

	tp := p.Child("trialTemplate")
	s.TrialTemplate.validate(tp, errs)
	if !s.TrialTemplate.Logs.ForwardLogs() {
		add(Invalid(tp.Child("logs", "forward"), "must be true: the experiment reads the trials' metrics from their forwarded logs"))
	}
	validateParamRefs(&s.TrialTemplate, append(slices.Clone(names), outer...), tp, errs)
}

// validateSearchSpace checks each parameter and returns the defined names, sorted.
func (s *ExperimentSpec) validateSearchSpace(p Path, errs *ErrorList) []string {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	first := map[string]int{}
	for i, ps := range s.SearchSpace {
		pp := p.Index(i)
		if ps.Name != "" {
			if j, ok := first[ps.Name]; ok {
				add(Invalid(pp.Child("name"), "duplicate name %q (first at %s)", ps.Name, p.Index(j)))
			} else {
				first[ps.Name] = i
			}
		}
		switch ps.Type {
		case ParameterInt, ParameterFloat:
			validateRange(ps, pp, errs)
		case ParameterCategorical:
			for _, f := range []struct {
				name string
				set  bool
			}{{"min", ps.Min != nil}, {"max", ps.Max != nil}, {"step", ps.Step != 0}, {"log", ps.Log}} {
				if f.set {
					add(Invalid(pp.Child(f.name), "applies to int and float parameters only"))
				}
			}
			if len(ps.Values) == 0 {
				add(Invalid(pp.Child("values"), "required for a categorical parameter"))
			}
			validateUnique(ps.Values, pp.Child("values"), errs)
		}
	}
	return sortedKeys(first)
}

// validateRange checks an int or float parameter's bounds, step and scale.
func validateRange(ps ParameterSpec, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if len(ps.Values) > 0 {
		add(Invalid(p.Child("values"), "applies to categorical parameters only"))
	}
	isInt := ps.Type == ParameterInt
	whole := func(v float64) bool { return v == math.Trunc(v) && math.Abs(v) <= 1<<53 }
	if ps.Min == nil {
		add(Required(p.Child("min")))
	} else if isInt && !whole(*ps.Min) {
		add(Invalid(p.Child("min"), "must be a whole number for an int parameter"))
	}
	if ps.Max == nil {
		add(Required(p.Child("max")))
	} else if isInt && !whole(*ps.Max) {
		add(Invalid(p.Child("max"), "must be a whole number for an int parameter"))
	}
	bounded := ps.Min != nil && ps.Max != nil
	if bounded && *ps.Max <= *ps.Min {
		add(Invalid(p.Child("max"), "must be greater than min"))
		bounded = false
	}
	if bounded && math.IsInf(*ps.Max-*ps.Min, 0) {
		// The samplers scale by max - min: an infinite width makes every value NaN.
		add(Invalid(p.Child("max"), "max - min must be a finite number (got %g - %g)", *ps.Max, *ps.Min))
		bounded = false
	}
	switch {
	case ps.Step < 0:
		add(Invalid(p.Child("step"), "must be > 0"))
	case ps.Step > 0 && isInt && !whole(ps.Step):
		add(Invalid(p.Child("step"), "must be a whole number for an int parameter"))
	case ps.Step > 0 && bounded && ps.Step > *ps.Max-*ps.Min:
		add(Invalid(p.Child("step"), "must be at most max - min (%g)", *ps.Max-*ps.Min))
	case ps.Step > 0 && ps.Log:
		add(Invalid(p.Child("step"), "cannot be combined with log"))
	}
	if ps.Log && ps.Min != nil && *ps.Min <= 0 {
		add(Invalid(p.Child("min"), "must be > 0 when log is true"))
	}
}

// validateParamRefs reports every ${params.NAME} of the template whose NAME the search
// space does not define, and every unterminated reference.
func validateParamRefs(t *TrainingJobSpec, defined []string, p Path, errs *ErrorList) {
	check := func(s string, fp Path) {
		refs, err := ParamRefs(s)
		if err != nil {
			*errs = append(*errs, Invalid(fp, "%v", err))
			return
		}
		for _, name := range refs {
			if !slices.Contains(defined, name) {
				*errs = append(*errs, Invalid(fp, "unknown parameter %q in %s%s}; the search space defines %s",
					name, paramRefOpen, name, strings.Join(defined, ", ")))
			}
		}
	}
	forTemplateStrings(t, p, check)
}

// forTemplateStrings calls fn with every string of a template where parameters are
// substituted: command, args and env values, the job's and each role's, and the
// metrics files' paths.
func forTemplateStrings(t *TrainingJobSpec, p Path, fn func(s string, p Path)) {
	list := func(l []string, lp Path) {
		for i, s := range l {
			fn(s, lp.Index(i))
		}
	}
	env := func(l []EnvVar, lp Path) {
		for i, e := range l {
			fn(e.Value, lp.Index(i).Child("value"))
		}
	}
	list(t.Command, p.Child("command"))
	list(t.Args, p.Child("args"))
	env(t.Env, p.Child("env"))
	for _, name := range sortedKeys(t.Roles) {
		r, rp := t.Roles[name], p.Child("roles").Key(name)
		list(r.Command, rp.Child("command"))
		list(r.Args, rp.Child("args"))
		env(r.Env, rp.Child("env"))
	}
	if t.Metrics != nil {
		for i, c := range t.Metrics.Collectors {
			if c.File != nil {
				fn(c.File.Path, p.Child("metrics", "collectors").Index(i).Child("file", "path"))
			}
		}
	}
}

// ParamRefs returns the parameter names s refers to as ${params.NAME}, in order, or an
// error for a reference without its closing brace or without a name.
func ParamRefs(s string) ([]string, error) {
	var names []string
	for {
		i := strings.Index(s, paramRefOpen)
		if i < 0 {
			return names, nil
		}
		rest := s[i+len(paramRefOpen):]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			return nil, fmt.Errorf("unterminated %s: want %sNAME}", paramRefOpen, paramRefOpen)
		}
		if j == 0 {
			return nil, fmt.Errorf("%s} names no parameter", paramRefOpen)
		}
		names = append(names, rest[:j])
		s = rest[j+1:]
	}
}

// Trial job labels.
const (
	LabelExperiment = "experiment"
	LabelTrial      = "trial"
)

// TrialJob returns the TrainingJob that runs trial id of the experiment under the job
// name job, with the parameter values (as text, by parameter name) substituted into
// the template. The job carries the experiment's
// labels and annotations, plus labels experiment=<name> and trial=<id>; a checkpoint
// URI gets "/<job>" appended.
func (e *Experiment) TrialJob(job string, id int, values map[string]string) (TrainingJob, error) {
	var spec TrainingJobSpec
	data, err := json.Marshal(&e.Spec.TrialTemplate)
	if err == nil {
		err = json.Unmarshal(data, &spec)
	}
	if err != nil {
		return TrainingJob{}, fmt.Errorf("schemas: copy trial template: %w", err)
	}
	// The values go into arguments and environment values, never through a shell's
	// parser (SubstituteJob). References other than ${params.NAME} are left as written.
	errs := SubstituteJob(&spec, NewPath("spec"), func(r TemplateRef) (string, error) {
		if r.Root != RefParams {
			return r.String(), nil
		}
		v, ok := values[r.Name]
		if !ok {
			return "", fmt.Errorf("parameter %q is not defined", r.Name)
		}
		return v, nil
	})
	if len(errs) > 0 {
		return TrainingJob{}, fmt.Errorf("schemas: trial %d: %w", id, errs[0])
	}
	if spec.Checkpoint != nil {
		spec.Checkpoint.URI = strings.TrimRight(spec.Checkpoint.URI, "/") + "/" + job
	}
	labels := make(map[string]string, len(e.Metadata.Labels)+2)
	for _, k := range sortedKeys(e.Metadata.Labels) {
		labels[k] = e.Metadata.Labels[k]
	}
	labels[LabelExperiment] = e.Metadata.Name
	labels[LabelTrial] = strconv.Itoa(id)
	var annotations map[string]string
	if len(e.Metadata.Annotations) > 0 {
		annotations = make(map[string]string, len(e.Metadata.Annotations))
		for _, k := range sortedKeys(e.Metadata.Annotations) {
			annotations[k] = e.Metadata.Annotations[k]
		}
	}
	return TrainingJob{
		APIVersion: APIVersion,
		Kind:       KindTrainingJob,
		Metadata: ObjectMeta{Name: job, Workspace: e.Metadata.Workspace, Labels: labels,
			Annotations: annotations},
		Spec: spec,
	}, nil
}

// DecodeExperiment is Decode for a document that must be an Experiment.
func DecodeExperiment(data []byte) (*Experiment, error) {
	return decodeAs[Experiment](data, KindExperiment)
}

// JSONSchemaExtend pins apiVersion and kind, and bounds the name.
func (Experiment) JSONSchemaExtend(s *jsonschema.Schema) {
	pinKind(s, KindExperiment)
}

// JSONSchemaExtend says what each parameter type requires.
func (ParameterSpec) JSONSchemaExtend(s *jsonschema.Schema) {
	numeric, categorical := jsonschema.NewProperties(), jsonschema.NewProperties()
	numeric.Set("type", &jsonschema.Schema{Enum: []any{string(ParameterInt), string(ParameterFloat)}})
	categorical.Set("type", &jsonschema.Schema{Const: string(ParameterCategorical)})
	s.OneOf = []*jsonschema.Schema{
		{Properties: numeric, Required: []string{"min", "max"}},
		{Properties: categorical, Required: []string{"values"}},
	}
}

// GridSize is the number of points of the search space's grid, or 0 when a float
// parameter has no step (no finite grid) or the grid is larger than 2^40.
func (s *ExperimentSpec) GridSize() int64 {
	n := int64(1)
	for _, ps := range s.SearchSpace {
		var k int64
		switch ps.Type {
		case ParameterCategorical:
			k = int64(len(ps.Values))
		default:
			if ps.Min == nil || ps.Max == nil {
				return 0
			}
			step := ps.Step
			if step <= 0 {
				if ps.Type == ParameterFloat {
					return 0
				}
				step = 1
			}
			k = int64(math.Floor((*ps.Max-*ps.Min)/step+1e-9)) + 1
		}
		if k <= 0 {
			return 0
		}
		if n > maxGridSize/k {
			return 0
		}
		n *= k
	}
	return n
}
