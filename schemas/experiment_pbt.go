package schemas

import "math"

// Population-based training (algorithm pbt): its settings, its checks and the lineage a
// trial reports (see docs/hpo.md).

// PBTSpec configures population-based training. spec.parallelism members train at a
// time, in generations of perturbationInterval steps; each generation is one trial per
// member (spec.maxTrials = population × generations). After a generation the members
// whose value is in the bottom quantileFraction copy the newest complete checkpoint and
// the parameters of a member of the top quantileFraction (exploit) and perturb the
// parameters (explore); the others carry on from their own checkpoint.
type PBTSpec struct {
	// PerturbationInterval is the length of a generation in units of the objective's
	// stepMetric: a trial starts from its checkpoint (DLC_RESUME_FROM) and trains until
	// its step metric reaches the generation's end, which it is told in
	// DLC_STOP_AT_STEP; then it saves a checkpoint and exits.
	PerturbationInterval int64 `json:"perturbationInterval" jsonschema:"minimum=1"`
	// QuantileFraction is the share of the population, ranked by objective, whose
	// members are replaced (the bottom) and which the donors are drawn from (the top);
	// in (0, 0.5], default 0.25.
	QuantileFraction float64 `json:"quantileFraction,omitempty"`
	// ResampleProbability is the chance that explore draws a parameter anew from the
	// search space rather than perturbing the donor's value; in [0, 1], default 0.25.
	ResampleProbability *float64 `json:"resampleProbability,omitempty"`
	// PerturbationFactors are what explore multiplies a numeric parameter by (one
	// drawn with equal chance); a categorical parameter moves to a neighbouring choice
	// instead. Default [1.2, 0.8].
	PerturbationFactors []float64 `json:"perturbationFactors,omitempty" jsonschema:"maxItems=8"`
}

// Defaults of algorithm pbt.
const (
	DefaultPBTQuantileFraction    = 0.25
	DefaultPBTResampleProbability = 0.25
)

// DefaultPBTPerturbationFactors are explore's factors unless perturbationFactors says.
var DefaultPBTPerturbationFactors = []float64{1.2, 0.8}

// TrialLineage is a trial's place in a population-based training: which member it is,
// in which generation, and what it started from.
type TrialLineage struct {
	// Member numbers the population's members from 0.
	Member int `json:"member"`
	// Generation numbers the member's segments from 0.
	Generation int `json:"generation"`
	// Parent is the trial the member ran in the previous generation.
	Parent *int `json:"parent,omitempty"`
	// Donor is the trial whose checkpoint and parameters this one copied (exploit);
	// unset when the member carried on from its own.
	Donor *int `json:"donor,omitempty"`
	// ResumeFrom is the checkpoint the trial started from (DLC_RESUME_FROM).
	ResumeFrom string `json:"resumeFrom,omitempty"`
	// ParamsBefore are the parameters before explore (the donor's); the trial's params
	// are those after.
	ParamsBefore map[string]any `json:"paramsBefore,omitempty"`
	// Explore says per parameter what explore did: "*1.2", "*0.8", "+1", "-1" or
	// "resampled".
	Explore map[string]string `json:"explore,omitempty"`
	// StopAtStep is the step at which the trial's generation ends.
	StopAtStep int64 `json:"stopAtStep"`
}

// PBTSettings is spec.algorithm.pbt with its defaults.
func (s *ExperimentSpec) PBTSettings() PBTSpec {
	var out PBTSpec
	if s.Algorithm.PBT != nil {
		out = *s.Algorithm.PBT
	}
	if out.QuantileFraction == 0 {
		out.QuantileFraction = DefaultPBTQuantileFraction
	}
	if out.ResampleProbability == nil {
		p := DefaultPBTResampleProbability
		out.ResampleProbability = &p
	}
	if len(out.PerturbationFactors) == 0 {
		out.PerturbationFactors = DefaultPBTPerturbationFactors
	}
	return out
}

func (s *ExperimentSpec) validatePBT(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	pp := p.Child("algorithm", "pbt")
	if s.Algorithm.Name != AlgorithmPBT {
		if s.Algorithm.PBT != nil {
			add(Invalid(pp, "applies to algorithm pbt only"))
		}
		return
	}
	c := s.Algorithm.PBT
	if c == nil {
		add(Invalid(pp.Child("perturbationInterval"), "required: algorithm pbt needs the length of a generation, in steps of the objective's stepMetric"))
	} else {
		if q := c.QuantileFraction; q != 0 && !(q > 0 && q <= 0.5) {
			add(Invalid(pp.Child("quantileFraction"), "must be in (0, 0.5]"))
		}
		if r := c.ResampleProbability; r != nil && !(*r >= 0 && *r <= 1) {
			add(Invalid(pp.Child("resampleProbability"), "must be in [0, 1]"))
		}
		for i, f := range c.PerturbationFactors {
			if !(f > 0) || math.IsInf(f, 0) {
				add(Invalid(pp.Child("perturbationFactors").Index(i), "must be a number > 0"))
			}
		}
	}
	if s.Parallelism < 2 {
		add(Invalid(p.Child("parallelism"), "must be >= 2 with algorithm pbt: it is the population size"))
	} else if s.MaxTrials%s.Parallelism != 0 || s.MaxTrials < 2*s.Parallelism {
		add(Invalid(p.Child("maxTrials"), "must be a multiple of parallelism (%d), at least 2 generations: population × generations", s.Parallelism))
	}
	if r := s.EarlyStopping.Rule; r != "" && r != EarlyStoppingNone {
		add(Invalid(p.Child("earlyStopping", "rule"), "must be none with algorithm pbt: the bottom of the population is replaced instead"))
	}
	if s.TrialTemplate.Checkpoint == nil || s.TrialTemplate.Checkpoint.URI == "" {
		add(Invalid(p.Child("trialTemplate", "checkpoint", "uri"), "required: algorithm pbt copies checkpoints from trial to trial"))
	} else if s.TrialTemplate.Checkpoint.ResumeFrom != "" {
		add(Invalid(p.Child("trialTemplate", "checkpoint", "resumeFrom"), "not allowed with algorithm pbt: each trial resumes from the checkpoint pbt picks"))
	}
}
