package schemas

import (
	"math"
	"slices"
	"strconv"
)

// Checks of the algorithms beyond TPE and of several objectives (see docs/hpo.md).

// MaxObjectives bounds spec.objectives.
const MaxObjectives = 8

// Hyperband reports whether the algorithm runs its trials in Hyperband brackets.
func (a AlgorithmName) Hyperband() bool { return a == AlgorithmHyperband || a == AlgorithmBOHB }

// Startup reports whether the algorithm reads algorithm.startupTrials.
func (a AlgorithmName) Startup() bool {
	return a == "" || a == AlgorithmTPE || a == AlgorithmGP || a == AlgorithmBOHB
}

// MultiObjective reports whether the algorithm can search several objectives.
func (a AlgorithmName) MultiObjective() bool {
	return a == AlgorithmNSGA2 || a == AlgorithmRandom || a == AlgorithmGrid
}

// PrimaryObjective is the objective whose reports are the trials' intermediate values:
// spec.objective, or the first of spec.objectives.
func (s *ExperimentSpec) PrimaryObjective() *ObjectiveSpec {
	if s.Objective.Metric == "" && len(s.Objectives) > 0 {
		return &s.Objectives[0]
	}
	return &s.Objective
}

// AllObjectives is spec.objectives, or spec.objective alone.
func (s *ExperimentSpec) AllObjectives() []ObjectiveSpec {
	if len(s.Objectives) > 0 {
		return s.Objectives
	}
	return []ObjectiveSpec{s.Objective}
}

// MultiObjective reports whether the spec has several objectives.
func (s *ExperimentSpec) MultiObjective() bool { return len(s.Objectives) > 0 }

func (s *ExperimentSpec) validateObjectives(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if len(s.Objectives) == 0 {
		return
	}
	osp := p.Child("objectives")
	if !s.Objective.IsZero() {
		add(Invalid(p.Child("objective"), "give either objective or objectives, not both"))
	}
	if len(s.Objectives) < 2 {
		add(Invalid(osp, "must have at least 2 objectives (use objective for one)"))
	}
	seen := map[string]int{}
	for i, o := range s.Objectives {
		ip := osp.Index(i)
		if j, ok := seen[o.Metric]; ok && o.Metric != "" {
			add(Invalid(ip.Child("metric"), "duplicate metric %q (first at %s)", o.Metric, osp.Index(j)))
		} else {
			seen[o.Metric] = i
		}
		if o.Goal != nil {
			add(Invalid(ip.Child("goal"), "not allowed with several objectives"))
		}
		if i > 0 && o.StepMetric != "" {
			add(Invalid(ip.Child("stepMetric"), "only the first objective's stepMetric numbers the reports"))
		}
		if o.Aggregate != "" {
			add(Invalid(ip.Child("aggregate"), "applies to a single objective (spec.objective) only"))
		}
		if len(o.Metrics) > 0 {
			add(Invalid(ip.Child("metrics"), "applies to a single objective (spec.objective) only"))
		}
		if o.StepMetric != "" && s.Objectives[0].StepMetric == o.Metric {
			add(Invalid(osp.Index(0).Child("stepMetric"), "must differ from every objective's metric"))
		}
	}
	if a := s.Algorithm.Name; a != "" && !a.MultiObjective() {
		add(Invalid(p.Child("algorithm", "name"), "%s searches one objective; with objectives use nsga2, random or grid", a))
	}
	if r := s.EarlyStopping.Rule; r != "" && r != EarlyStoppingNone {
		add(Invalid(p.Child("earlyStopping", "rule"), "must be none with several objectives"))
	}
}

func (s *ExperimentSpec) validateAlgorithm(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	a, es := s.Algorithm.Name, &s.EarlyStopping
	ap, ep := p.Child("algorithm"), p.Child("earlyStopping")
	if s.Algorithm.PopulationSize != 0 {
		if a != AlgorithmCMAES && a != AlgorithmNSGA2 {
			add(Invalid(ap.Child("populationSize"), "applies to algorithms cmaes and nsga2 only"))
		} else if s.Algorithm.PopulationSize < 2 {
			add(Invalid(ap.Child("populationSize"), "must be >= 2 (0 for the default)"))
		}
	}
	if a.Hyperband() && es.Rule != "" && es.Rule != EarlyStoppingHyperband {
		add(Invalid(ep.Child("rule"), "must be hyperband (or unset) with algorithm %s", a))
	}
	if (es.Rule == EarlyStoppingHyperband || (es.Rule == "" && a.Hyperband())) && es.MaxResource <= 0 {
		add(Invalid(ep.Child("maxResource"), "required by hyperband: the step at which a trial that is never stopped ends"))
	}
	if a == AlgorithmCMAES {
		numeric := false
		for _, ps := range s.SearchSpace {
			if ps.Type != ParameterCategorical {
				numeric = true
			}
		}
		if !numeric && len(s.SearchSpace) > 0 {
			add(Invalid(ap.Child("name"), "cmaes needs at least one int or float parameter"))
		}
	}
}

// validateAggregate checks spec.objective's aggregate and weighted metrics.
func (s *ExperimentSpec) validateAggregate(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	o, op := &s.Objective, p.Child("objective")
	if len(o.Metrics) == 0 { // the aggregate's values are checked by its tag
		return
	}
	mp := op.Child("metrics")
	if len(o.Metrics) < 2 {
		add(Invalid(mp, "must have at least 2 metrics (a weighted objective sums them)"))
	}
	seen := map[string]int{}
	for i, m := range o.Metrics {
		ip := mp.Index(i)
		switch {
		case m.Metric == "": // required by its tag
		case m.Metric == o.Metric:
			add(Invalid(ip.Child("metric"), "must differ from spec.objective.metric, which names the weighted sum"))
		case m.Metric == o.StepMetric:
			add(Invalid(ip.Child("metric"), "must differ from spec.objective.stepMetric"))
		default:
			if j, ok := seen[m.Metric]; ok {
				add(Invalid(ip.Child("metric"), "duplicate metric %q (first at %s)", m.Metric, mp.Index(j)))
			} else {
				seen[m.Metric] = i
			}
		}
		if m.Weight == 0 || math.IsNaN(m.Weight) || math.IsInf(m.Weight, 0) {
			add(Invalid(ip.Child("weight"), "must be a finite number other than 0"))
		}
	}
	if r := s.EarlyStopping.Rule; r != "" && r != EarlyStoppingNone {
		add(Invalid(p.Child("earlyStopping", "rule"), "must be none with a weighted objective (spec.objective.metrics)"))
	}
}

// withoutObjectiveRequired drops what the field tags say of an empty spec.objective
// (its metric and direction are required) when spec.objectives replaces it.
func (s *ExperimentSpec) withoutObjectiveRequired(errs ErrorList) ErrorList {
	if len(s.Objectives) == 0 || !s.Objective.IsZero() {
		return errs
	}
	out := errs[:0]
	for _, e := range errs {
		if e.Field == "spec.objective.metric" || e.Field == "spec.objective.direction" {
			continue
		}
		out = append(out, e)
	}
	return out
}

// validateConstraints checks spec.constraints beyond their tags (the metric's pattern
// and length, at most 8): a metric each, at least one finite bound, min not above max,
// no metric twice, none that is an objective or the step metric.
func (s *ExperimentSpec) validateConstraints(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	cp := p.Child("constraints")
	objective := map[string]bool{s.Objective.Metric: true, s.Objective.StepMetric: true}
	for _, o := range s.Objectives {
		objective[o.Metric], objective[o.StepMetric] = true, true
	}
	seen := map[string]int{}
	for i, c := range s.Constraints {
		ip := cp.Index(i)
		switch {
		case c.Metric == "":
			add(Required(ip.Child("metric")))
		case objective[c.Metric]:
			add(Invalid(ip.Child("metric"), "%q is an objective or the step metric; a constraint bounds another metric", c.Metric))
		}
		if j, ok := seen[c.Metric]; ok && c.Metric != "" {
			add(Invalid(ip.Child("metric"), "duplicate metric %q (first at %s)", c.Metric, cp.Index(j)))
		} else {
			seen[c.Metric] = i
		}
		if c.Max == nil && c.Min == nil {
			add(Invalid(ip, "give max, min or both"))
		}
		for _, b := range []struct {
			name string
			v    *float64
		}{{"max", c.Max}, {"min", c.Min}} {
			if b.v != nil && (math.IsNaN(*b.v) || math.IsInf(*b.v, 0)) {
				add(Invalid(ip.Child(b.name), "must be a finite number"))
			}
		}
		if c.Max != nil && c.Min != nil && *c.Min > *c.Max {
			add(Invalid(ip.Child("min"), "must not be above max (%g)", *c.Max))
		}
	}
}

// validateWarmStart checks spec.warmStart beyond its tags: at least one experiment, none
// twice, and not the experiment itself.
func (s *ExperimentSpec) validateWarmStart(self string, p Path, errs *ErrorList) {
	if s.WarmStart == nil {
		return
	}
	ep := p.Child("warmStart", "experiments")
	if len(s.WarmStart.Experiments) == 0 {
		*errs = append(*errs, Required(ep))
	}
	seen := map[string]bool{}
	for i, name := range s.WarmStart.Experiments {
		switch {
		case name == self && self != "":
			*errs = append(*errs, Invalid(ep.Index(i), "an experiment cannot warm-start from itself"))
		case seen[name]:
			*errs = append(*errs, Invalid(ep.Index(i), "duplicate experiment %q", name))
		}
		seen[name] = true
	}
	if s.WarmStart != nil && s.Algorithm.Name == AlgorithmPBT {
		*errs = append(*errs, Invalid(p.Child("warmStart"), "algorithm pbt starts from its own population"))
	}
}

// validateConditions checks each searchSpace[i].condition: an earlier parameter, in
// values that are its choices (or an int's values), min and max only for a numeric one,
// min not above max; not with algorithms grid and pbt.
func (s *ExperimentSpec) validateConditions(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	for i, ps := range s.SearchSpace {
		c := ps.Condition
		if c == nil {
			continue
		}
		cp := p.Child("searchSpace").Index(i).Child("condition")
		switch s.Algorithm.Name {
		case AlgorithmGrid, AlgorithmPBT:
			add(Invalid(cp, "algorithm %s needs every parameter in every trial; conditions work with the others", s.Algorithm.Name))
			continue
		}
		parent := -1
		for j := range i {
			if s.SearchSpace[j].Name == c.Parameter {
				parent = j
			}
		}
		if parent < 0 {
			add(Invalid(cp.Child("parameter"), "%q is not an earlier parameter of the search space", c.Parameter))
			continue
		}
		pp := s.SearchSpace[parent]
		if len(c.In) == 0 && c.Min == nil && c.Max == nil {
			add(Invalid(cp, "give in, min or max"))
		}
		for k, v := range c.In {
			switch pp.Type {
			case ParameterCategorical:
				if !slices.Contains(pp.Values, v) {
					add(Invalid(cp.Child("in").Index(k), "%q is not a value of %s", string(v), pp.Name))
				}
			case ParameterInt:
				f, err := strconv.ParseFloat(string(v), 64)
				if err != nil || f != math.Trunc(f) || (pp.Min != nil && f < *pp.Min) || (pp.Max != nil && f > *pp.Max) {
					add(Invalid(cp.Child("in").Index(k), "%q is not a value of %s", string(v), pp.Name))
				}
			default:
				add(Invalid(cp.Child("in"), "needs a categorical or int parameter; %s is a float (use min and max)", pp.Name))
			}
		}
		if (c.Min != nil || c.Max != nil) && pp.Type == ParameterCategorical {
			add(Invalid(cp, "min and max need a numeric parameter; %s is categorical (use in)", pp.Name))
		}
		if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
			add(Invalid(cp.Child("min"), "must not be above max (%g)", *c.Max))
		}
	}
}
