package hpo

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownAlgorithm is returned by New and NewStopper for a name they do not know.
var ErrUnknownAlgorithm = errors.New("hpo: unknown algorithm")

// ErrInvalidOption is wrapped by the errors of options given out-of-range values.
var ErrInvalidOption = errors.New("hpo: invalid option")

// Sampler names accepted by New.
const (
	SamplerGrid   = "grid"
	SamplerRandom = "random"
	SamplerTPE    = "tpe"
	SamplerCMAES  = "cmaes"
	SamplerGP     = "gp"
	SamplerBOHB   = "bohb"
	SamplerNSGA2  = "nsga2"
)

// SamplerOptions configure the samplers. Each sampler reads only the fields it knows.
type SamplerOptions struct {
	// GridPoints is the number of evenly spaced points (log-spaced on a log scale) a grid
	// takes from a float parameter that has no Step. Default 0: such a parameter is an
	// error for the grid sampler.
	GridPoints int
	// StartupTrials is the number of Completed or Pruned trials TPE needs before it stops
	// sampling at random. Default 10.
	StartupTrials int
	// EICandidates is the number of candidates TPE draws from the good-trial density to
	// pick the one with the highest l(x)/g(x). Default 24.
	EICandidates int
	// GammaFraction and GammaMax size TPE's good set: ceil(GammaFraction*n) trials, at
	// most GammaMax, of the n usable ones. Defaults 0.1 and 25.
	GammaFraction float64
	GammaMax      int
	// PriorWeight is the weight of the prior component (a wide kernel over the whole
	// range, or uniform over the categories) of each TPE density. Default 1.
	PriorWeight float64
	// Multivariate makes TPE model the parameters jointly (one kernel per trial over all
	// dimensions) rather than one at a time. Default false.
	Multivariate bool
	// ConstantLiar makes TPE count Running trials as bad ones, so that trials suggested
	// in parallel spread out. Default false.
	ConstantLiar bool
	// Scores says how TPE scores a candidate of a continuous parameter (TPEScores).
	// Default TPEScoresAuto: bandwidth-free kernels, univariate and multivariate (BOHB's
	// TPE keeps densities).
	Scores TPEScores
	// PopulationSize is CMA-ES's first λ (default 4+⌊ln n⌋ for n numeric
	// parameters) and NSGA-II's population (default 20).
	PopulationSize int
	// Budget places BOHB's budgets: the rungs MinResource·η^k below MaxResource, and
	// MaxResource itself. Defaults 1, 3 and 0 (no bound).
	Budget Budgets
}

// Budgets are the steps at which a multi-fidelity algorithm compares trials.
type Budgets struct {
	MinResource     int64
	ReductionFactor int
	MaxResource     int64
}

// PopulationSize sets CMA-ES's first population size λ or NSGA-II's population size
// (at least 2; 0 keeps the default).
func PopulationSize(n int) Option {
	return func(o *SamplerOptions) error {
		if n != 0 && n < 2 {
			return fmt.Errorf("%w: population size %d must be >= 2", ErrInvalidOption, n)
		}
		o.PopulationSize = n
		return nil
	}
}

// BOHBBudgets sets the budgets BOHB models at: rungs minResource·η^k below
// maxResource (0: no bound), as the hyperband stopping rule places them.
func BOHBBudgets(minResource int64, eta int, maxResource int64) Option {
	return func(o *SamplerOptions) error {
		if minResource < 1 || eta < 2 || maxResource < 0 {
			return fmt.Errorf("%w: budgets need min resource >= 1 (got %d), reduction factor >= 2 (got %d), max resource >= 0 (got %d)",
				ErrInvalidOption, minResource, eta, maxResource)
		}
		o.Budget = Budgets{minResource, eta, maxResource}
		return nil
	}
}

// Option sets a sampler option.
type Option func(*SamplerOptions) error

func defaultSamplerOptions() SamplerOptions {
	return SamplerOptions{
		StartupTrials: 10,
		EICandidates:  24,
		GammaFraction: 0.1,
		GammaMax:      25,
		PriorWeight:   1,
		Budget:        Budgets{MinResource: 1, ReductionFactor: 3},
	}
}

func applySamplerOptions(opts []Option) (SamplerOptions, error) {
	return applyOptions(defaultSamplerOptions(), opts)
}

// applyOptions applies opts, skipping nil ones, to the defaults o and returns the
// result, or the first option's error.
func applyOptions[O any, F ~func(*O) error](o O, opts []F) (O, error) {
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// atLeast returns an option that sets the field that field picks to v, or fails with
// ErrInvalidOption when v is below lo; what names the option in the error.
func atLeast[O any, T int | int64](what string, v, lo T, field func(*O) *T) func(*O) error {
	return func(o *O) error {
		if v < lo {
			return fmt.Errorf("%w: %s %d must be >= %d", ErrInvalidOption, what, v, lo)
		}
		*field(o) = v
		return nil
	}
}

// GridPoints sets how many points the grid takes from a float parameter without a Step
// (at least 2; default 0, which makes such a parameter an error).
func GridPoints(n int) Option {
	return atLeast("grid points", n, 2, func(o *SamplerOptions) *int { return &o.GridPoints })
}

// TPEStartupTrials sets the number of finished trials before TPE leaves random sampling
// (default 10; 0 starts modelling at once, from the prior alone).
func TPEStartupTrials(n int) Option {
	return atLeast("startup trials", n, 0, func(o *SamplerOptions) *int { return &o.StartupTrials })
}

// TPEEICandidates sets the number of candidates per suggestion (default 24).
func TPEEICandidates(n int) Option {
	return atLeast("EI candidates", n, 1, func(o *SamplerOptions) *int { return &o.EICandidates })
}

// TPEGamma sets the good set to ceil(fraction*n) trials, at most maxTrials (defaults 0.1
// and 25, Optuna's).
func TPEGamma(fraction float64, maxTrials int) Option {
	return func(o *SamplerOptions) error {
		if !(fraction > 0 && fraction < 1) || maxTrials < 1 {
			return fmt.Errorf("%w: gamma fraction %v must be in (0,1) and max %d >= 1", ErrInvalidOption, fraction, maxTrials)
		}
		o.GammaFraction, o.GammaMax = fraction, maxTrials
		return nil
	}
}

// TPEPriorWeight sets the weight of the prior component of each density (default 1).
func TPEPriorWeight(w float64) Option {
	return func(o *SamplerOptions) error {
		if !(w > 0) || !finite(w) {
			return fmt.Errorf("%w: prior weight %v must be > 0", ErrInvalidOption, w)
		}
		o.PriorWeight = w
		return nil
	}
}

// TPEMultivariate makes TPE model the parameters jointly (default false).
func TPEMultivariate(on bool) Option {
	return func(o *SamplerOptions) error { o.Multivariate = on; return nil }
}

// TPEConstantLiar makes TPE count Running trials among the bad ones (default false).
func TPEConstantLiar(on bool) Option {
	return func(o *SamplerOptions) error { o.ConstantLiar = on; return nil }
}

// TPEScores says how TPE scores the candidates of a continuous parameter, by l(x)/g(x)
// with the good and bad mixtures' terms either as densities or without their
// bandwidths. Quantised parameters are scored by probability mass either way.
type TPEScores int

const (
	// TPEScoresAuto is TPEScoresUnscaled, for univariate and multivariate TPE: what
	// measured level with Optuna 3.1 on Branin, Hartmann-6 and Rosenbrock-10 (docs/hpo.md,
	// "TPE against Optuna 3.1"). BOHB's TPE asks for TPEScoresDensity.
	TPEScoresAuto TPEScores = iota
	// TPEScoresDensity scores by the true mixture densities, each kernel's normal density
	// divided by its bandwidth, as Optuna does since its PR #5110 (November 2023).
	TPEScoresDensity
	// TPEScoresUnscaled counts each kernel by its shape alone, exp(−z²/2)/Z without the
	// 1/σ: what Optuna 3.1's TPESampler computes (its truncnorm.logpdf leaves out log σ),
	// so a wide kernel weighs as much at its centre as a narrow one.
	TPEScoresUnscaled
)

// TPEKernelScores sets how TPE scores candidates (default TPEScoresAuto).
func TPEKernelScores(k TPEScores) Option {
	return func(o *SamplerOptions) error {
		if k < TPEScoresAuto || k > TPEScoresUnscaled {
			return fmt.Errorf("%w: TPE scores %d unknown", ErrInvalidOption, k)
		}
		o.Scores = k
		return nil
	}
}

// unscaledKernels reports whether TPE scores with bandwidth-free kernels.
func (o *SamplerOptions) unscaledKernels() bool {
	switch o.Scores {
	case TPEScoresDensity:
		return false
	}
	return true
}

// SamplerNames lists the names New accepts.
var SamplerNames = []string{SamplerGrid, SamplerRandom, SamplerTPE, SamplerCMAES, SamplerGP, SamplerBOHB, SamplerNSGA2}

// New returns the sampler called name (one of SamplerNames) with the given options.
func New(name string, opts ...Option) (Sampler, error) {
	var (
		s   Sampler
		err error
	)
	switch name {
	case SamplerGrid:
		s, err = NewGrid(opts...)
	case SamplerRandom:
		s, err = NewRandom(opts...)
	case SamplerTPE:
		s, err = NewTPE(opts...)
	case SamplerCMAES:
		s, err = NewCMAES(opts...)
	case SamplerGP:
		s, err = NewGP(opts...)
	case SamplerBOHB:
		s, err = NewBOHB(opts...)
	case SamplerNSGA2:
		s, err = NewNSGA2(opts...)
	default:
		return nil, fmt.Errorf("%w: sampler %q (want %s)", ErrUnknownAlgorithm, name, strings.Join(SamplerNames, ", "))
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}
