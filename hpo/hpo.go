// Package hpo holds OpenDLC's hyper-parameter search algorithms: grid, random, TPE,
// CMA-ES, Gaussian-process BO, BOHB and NSGA-II samplers, the median, ASHA and
// Hyperband early-stopping rules, and population-based training's generation decisions
// (PBTNext). Every function here is pure: a
// suggestion is a function of the search space, the objective, the seed and the trial
// history, so the Experiment workflow can call it from workflow code and replaying the
// workflow gives the same suggestions.
package hpo

import "errors"

// ParamType is the type of one search-space dimension.
type ParamType string

// Parameter types.
const (
	Int         ParamType = "int"
	Float       ParamType = "float"
	Categorical ParamType = "categorical"
)

// Param is one dimension of a search space.
type Param struct {
	Name string
	Type ParamType
	// Min and Max bound int and float parameters (inclusive).
	Min, Max float64
	// Step, when > 0, quantises int and float values to Min + k*Step.
	Step float64
	// Log samples a float (or int) parameter on a log scale; Min must be > 0.
	Log bool
	// Values are a categorical parameter's choices.
	Values []string
	// Condition, when set, makes the parameter active only when an earlier parameter's
	// value satisfies it (conditional.go).
	Condition *Condition
}

// Space is an ordered list of parameters.
type Space []Param

// Direction says whether the objective is minimised or maximised.
type Direction string

// Directions.
const (
	Minimize Direction = "minimize"
	Maximize Direction = "maximize"
)

// TrialState is where a trial stands.
type TrialState string

// Trial states.
const (
	TrialRunning   TrialState = "Running"
	TrialCompleted TrialState = "Completed"
	TrialPruned    TrialState = "Pruned" // stopped early by an early-stopping rule
	TrialFailed    TrialState = "Failed"
)

// Report is one intermediate objective value reported by a trial at a step (an epoch,
// an iteration: any increasing integer the trainer reports).
type Report struct {
	Step  int64   `json:"step"`
	Value float64 `json:"value"`
}

// Trial is one suggested configuration and what is known of its outcome.
type Trial struct {
	// ID is the trial's 0-based number in suggestion order.
	ID int `json:"id"`
	// Params maps parameter name to value. Int values are integral floats; a
	// categorical value is the index of the choice in Param.Values.
	Params map[string]float64 `json:"params"`
	State  TrialState         `json:"state"`
	// Value is the final objective of a Completed trial (for a Pruned trial, its last
	// reported value).
	Value *float64 `json:"value,omitempty"`
	// Reports are the intermediate objective values in step order.
	Reports []Report `json:"reports,omitempty"`
	// Values are a Completed trial's objectives when History.Directions has several,
	// in the same order; Value then repeats the first.
	Values []float64 `json:"values,omitempty"`
	// Constraints are a Completed trial's constraint violations: at or below zero, the
	// constraint holds; above, it is broken by that much (constraints.go). Empty: the
	// trial is feasible.
	Constraints []float64 `json:"constraints,omitempty"`
}

// History is everything a sampler may look at.
type History struct {
	Space     Space
	Direction Direction
	Seed      int64
	Trials    []Trial
	// Directions, when it has more than one entry, makes the search multi-objective:
	// each Completed trial has one value per direction in Trial.Values. Only the
	// multi-objective samplers (nsga2) and random read it.
	Directions []Direction
}

// ErrExhausted is returned by a sampler that has no configuration left to suggest
// (grid search after the last grid point).
var ErrExhausted = errors.New("hpo: search space exhausted")

// Sampler suggests the parameters of trial number id from the history. It must be a
// pure function of its arguments: the same history, seed and id give the same params.
type Sampler interface {
	Suggest(h History, id int) (map[string]float64, error)
}

// Stopper is an early-stopping rule. ShouldStop reports whether the running trial t,
// having just reported at its latest step, should be stopped, given the other trials.
// It must be a pure function of its arguments.
type Stopper interface {
	ShouldStop(h History, t Trial) bool
}
