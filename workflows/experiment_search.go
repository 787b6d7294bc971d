package workflows

import (
	"errors"
	"math"
	"slices"
	"strconv"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// The search of the Experiment workflow: suggestions from package hpo's samplers, the
// early-stopping decisions, and the histories they see.

// suggestion is what the sampler answered for one trial.
type suggestion struct {
	Params    map[string]float64 `json:"params,omitempty"`
	Exhausted bool               `json:"exhausted,omitempty"`
	Err       string             `json:"err,omitempty"`
}

// suggest asks the sampler for trial n's parameters. The sampler is a pure function of
// what it is given, so a first execution is reproducible; the answer is still recorded
// (SideEffect) so that a replay reads it back and a later change to package hpo cannot
// make a running experiment's history non-deterministic.
func (w *experimentWorkflow) suggest(ctx workflow.Context, n int) suggestion {
	var sug suggestion
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		params, err := w.sampler.Suggest(w.samplerHistory(), n)
		switch {
		case errors.Is(err, hpo.ErrExhausted):
			return suggestion{Exhausted: true}
		case err != nil:
			return suggestion{Err: err.Error()}
		}
		return suggestion{Params: params}
	}).Get(&sug)
	if err != nil {
		return suggestion{Err: err.Error()}
	}
	return sug
}

// samplerHistory is what the sampler sees when it suggests a trial: every trial known
// now (knownHistory).
func (w *experimentWorkflow) samplerHistory() hpo.History {
	h := w.knownHistory(-1)
	w.addValues(&h)
	w.addConstraints(&h)
	w.addWarm(&h)
	return h
}

// stopperHistory is what the early-stopping rule compares trial id with: every other
// trial as it is now.
func (w *experimentWorkflow) stopperHistory(id int) hpo.History {
	return w.knownHistory(id)
}

func (w *experimentWorkflow) history() hpo.History {
	h := hpo.History{Space: w.space, Direction: hpo.Direction(w.exp.Spec.PrimaryObjective().Direction), Seed: w.st.Seed}
	if w.exp.Spec.MultiObjective() {
		for _, o := range w.exp.Spec.Objectives {
			h.Directions = append(h.Directions, hpo.Direction(o.Direction))
		}
	}
	return h
}

func hpoTrial(t *TrialState) hpo.Trial {
	ht := hpo.Trial{ID: t.ID, Params: t.Params, Value: t.Value}
	switch t.Phase {
	case schemas.TrialCompleted:
		ht.State = hpo.TrialCompleted
	case schemas.TrialPruned:
		ht.State = hpo.TrialPruned
	case schemas.TrialFailed:
		ht.State = hpo.TrialFailed
	default:
		ht.State = hpo.TrialRunning
	}
	for _, r := range t.Reports {
		ht.Reports = append(ht.Reports, hpo.Report{Step: r.Step, Value: r.Value})
	}
	return ht
}

// firstPrune returns the index of the first of reps at which the early-stopping rule
// stops the trial, or -1. It changes nothing.
func (w *experimentWorkflow) firstPrune(t *TrialState, reps []numberedReport) int {
	sim := *t
	hist := w.stopperHistory(t.ID)
	for i, r := range reps {
		sim.Reports = withReport(sim.Reports, r.Step, r.Value)
		v := r.Value
		sim.Value, sim.Step = &v, r.Step
		if w.stopper.ShouldStop(hist, hpoTrial(&sim)) {
			return i
		}
	}
	return -1
}

func (w *experimentWorkflow) allTrialsHistory() hpo.History {
	h := w.history()
	for _, t := range w.st.Trials {
		h.Trials = append(h.Trials, hpoTrial(t))
	}
	w.addValues(&h)
	w.addConstraints(&h)
	return h
}

// searchSpace converts the spec's search space to hpo's.
func searchSpace(ps []schemas.ParameterSpec) hpo.Space {
	space := make(hpo.Space, len(ps))
	for i, p := range ps {
		hp := hpo.Param{Name: p.Name, Type: hpo.ParamType(p.Type), Step: p.Step, Log: p.Log}
		if p.Min != nil {
			hp.Min = *p.Min
		}
		if p.Max != nil {
			hp.Max = *p.Max
		}
		for _, v := range p.Values {
			hp.Values = append(hp.Values, string(v))
		}
		hp.Condition = condition(ps, p.Condition)
		space[i] = hp
	}
	return space
}

func newSampler(spec *schemas.ExperimentSpec) (hpo.Sampler, error) {
	a := spec.Algorithm
	var opts []hpo.Option
	if a.Name == schemas.AlgorithmTPE || a.Name == "" {
		opts = append(opts, hpo.TPEMultivariate(a.Multivariate), hpo.TPEConstantLiar(a.ConstantLiar))
	}
	if a.Name.Startup() && a.StartupTrials != nil {
		opts = append(opts, hpo.TPEStartupTrials(int(*a.StartupTrials)))
	}
	opts = append(opts, newerSamplerOptions(spec)...)
	if a.Name == schemas.AlgorithmHyperband || a.Name == schemas.AlgorithmPBT {
		a.Name = schemas.AlgorithmRandom // random search in brackets; pbt's first generation
	}
	name := string(a.Name)
	if name == "" {
		name = string(schemas.DefaultAlgorithm)
	}
	return hpo.New(name, opts...)
}

func newStopper(es schemas.EarlyStoppingSpec) (hpo.Stopper, error) {
	var opts []hpo.StopperOption
	switch es.Rule {
	case schemas.EarlyStoppingASHA, schemas.EarlyStoppingHyperband:
		if es.MinResource > 0 {
			opts = append(opts, hpo.ASHAMinResource(es.MinResource))
		}
		if es.ReductionFactor > 0 {
			opts = append(opts, hpo.ASHAReductionFactor(int(es.ReductionFactor)))
		}
		if es.MaxResource > 0 {
			opts = append(opts, hpo.ASHAMaxResource(es.MaxResource))
		}
	case schemas.EarlyStoppingMedian:
		if es.StartupTrials != nil {
			opts = append(opts, hpo.MedianStartupTrials(int(*es.StartupTrials)))
		}
		if es.WarmupSteps > 0 {
			opts = append(opts, hpo.MedianWarmupSteps(es.WarmupSteps))
		}
	}
	return hpo.NewStopper(string(es.Rule), opts...)
}

// condition converts a parameter's condition to hpo's: In as the parent's choice
// indexes (categorical) or numbers (int). A condition that does not fit the space is
// left to hpo.Validate, which refuses it (the spec's validation refused it first).
func condition(ps []schemas.ParameterSpec, c *schemas.ParameterCondition) *hpo.Condition {
	if c == nil {
		return nil
	}
	out := &hpo.Condition{Param: c.Parameter, Min: c.Min, Max: c.Max}
	for _, p := range ps {
		if p.Name != c.Parameter {
			continue
		}
		for _, v := range c.In {
			if p.Type == schemas.ParameterCategorical {
				out.Values = append(out.Values, float64(slices.Index(p.Values, v)))
			} else if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				out.Values = append(out.Values, f)
			} else {
				out.Values = append(out.Values, math.NaN())
			}
		}
	}
	return out
}
