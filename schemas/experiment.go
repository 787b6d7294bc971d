package schemas

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
)

// KindExperiment is the kind of an Experiment document.
const KindExperiment Kind = "Experiment"

// Defaults of an Experiment that Default fills in.
const (
	// DefaultParallelism is how many trials run at a time unless spec.parallelism says.
	DefaultParallelism = 1
	// DefaultMaxFailedTrials is how many trials may fail before the experiment fails.
	DefaultMaxFailedTrials = 3
	// DefaultMaxTrialRetries is how many times a failed trial is run again with the same
	// parameters before it counts as failed.
	DefaultMaxTrialRetries = 1
	// DefaultAlgorithm is the search algorithm unless spec.algorithm.name says.
	DefaultAlgorithm = AlgorithmTPE
	// DefaultEarlyStopping is the early-stopping rule unless spec.earlyStopping.rule says.
	DefaultEarlyStopping = EarlyStoppingNone
	// DefaultMedianStartupTrials is how many trials must complete before the median rule
	// stops any.
	DefaultMedianStartupTrials = 5
	// DefaultStepMetric is the metric whose value numbers a trial's reports.
	DefaultStepMetric = "step"
)

// Bounds of an Experiment.
const (
	// MaxExperimentTrials bounds spec.maxTrials, also after extend: the experiment's
	// state, every trial included, must stay small enough to carry across
	// continue-as-new.
	MaxExperimentTrials = 1000
	// MaxExperimentNameLength leaves room in a trial's job name (<experiment>-t<N>-r<K>,
	// at most 50 characters) for the trial number and the retry.
	MaxExperimentNameLength = 40
	// MaxTrialRetries bounds spec.maxTrialRetries.
	MaxTrialRetries = 5
)

// Experiment is a hyper-parameter search: it runs trials of one training job template
// with parameters suggested by a search algorithm, stops the trials that do badly
// early, and records the best.
type Experiment struct {
	// APIVersion must be opendlc.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be Experiment.
	Kind Kind `json:"kind"`
	// Metadata names the experiment and its workspace. The name has at most 40
	// characters; the labels are copied to every trial job.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is the search: space, objective, algorithm, limits and the trial template.
	Spec ExperimentSpec `json:"spec"`
}

// ExperimentSpec describes a search.
type ExperimentSpec struct {
	// SearchSpace lists the hyper-parameters to tune, in the order the algorithm
	// sees them.
	SearchSpace []ParameterSpec `json:"searchSpace" jsonschema:"minItems=1,maxItems=32"`
	// Objective is the metric the trials report and the direction that is better.
	// Give either objective or objectives.
	Objective ObjectiveSpec `json:"objective,omitzero"`
	// Objectives, instead of objective, makes the search multi-objective: from 2 to 8
	// metrics, each with its direction (goal and stepMetric are not allowed, but the
	// first objective's stepMetric numbers the reports). The experiment reports the
	// Pareto front of its completed trials; algorithm nsga2 (the default here),
	// random or grid.
	Objectives []ObjectiveSpec `json:"objectives,omitempty" jsonschema:"maxItems=8"`
	// Constraints mark a trial infeasible when a metric it reports is out of bounds (a
	// memory or latency budget): an infeasible trial is never the best one nor on the
	// Pareto front, and tpe, cmaes, gp, nsga2 and bohb steer away from it. Up to 8.
	Constraints []ConstraintSpec `json:"constraints,omitempty" jsonschema:"maxItems=8"`
	// WarmStart seeds the algorithm with the completed trials of earlier experiments of
	// the workspace.
	WarmStart *WarmStartSpec `json:"warmStart,omitempty"`
	// Algorithm suggests each trial's parameters; default tpe.
	Algorithm AlgorithmSpec `json:"algorithm,omitempty,omitzero"`
	// EarlyStopping stops trials that do badly before they finish; default none.
	EarlyStopping EarlyStoppingSpec `json:"earlyStopping,omitempty,omitzero"`
	// MaxTrials is how many trials to run (extend raises it), from 1 to 1000.
	MaxTrials int32 `json:"maxTrials" jsonschema:"minimum=1,maximum=1000"`
	// Parallelism is how many trials run at a time; 0 (or unset) means 1.
	Parallelism int32 `json:"parallelism,omitempty" jsonschema:"minimum=0,maximum=256"`
	// MaxFailedTrials is how many trials may fail (after their retries) before the
	// experiment fails; default 3.
	MaxFailedTrials *int32 `json:"maxFailedTrials,omitempty" jsonschema:"minimum=0,maximum=1000"`
	// MaxTrialRetries is how many times a failed trial is run again, with the same
	// parameters, before it counts as failed; from 0 to 5, default 1.
	MaxTrialRetries *int32 `json:"maxTrialRetries,omitempty" jsonschema:"minimum=0,maximum=5"`
	// TrialTemplate is the TrainingJob spec every trial runs. "${params.NAME}" in its
	// command, args and env values (also the roles') is replaced by the trial's value
	// of parameter NAME; every replica also gets all the values as JSON in DLC_PARAMS.
	// A checkpoint URI gets the trial's job name appended, so trials do not share
	// checkpoints.
	TrialTemplate TrainingJobSpec `json:"trialTemplate"`
}

// ParameterType is the type of one search-space dimension.
type ParameterType string

// Parameter types.
const (
	ParameterInt         ParameterType = "int"
	ParameterFloat       ParameterType = "float"
	ParameterCategorical ParameterType = "categorical"
)

// ParameterTypes lists every parameter type.
var ParameterTypes = []ParameterType{ParameterInt, ParameterFloat, ParameterCategorical}

// ParameterSpec is one hyper-parameter: an int or float range, or a list of choices.
type ParameterSpec struct {
	// Name is how the template refers to the parameter (${params.NAME}) and its key in
	// DLC_PARAMS: letters, digits, '_' and '-', not starting with a digit or '-'.
	Name string `json:"name" jsonschema:"maxLength=63,pattern=^[A-Za-z_][A-Za-z0-9_-]*$"`
	// Type is int, float or categorical.
	Type ParameterType `json:"type" jsonschema:"enum=int,enum=float,enum=categorical"`
	// Min is the smallest value of an int or float parameter (inclusive).
	Min *float64 `json:"min,omitempty"`
	// Max is the largest value of an int or float parameter (inclusive).
	Max *float64 `json:"max,omitempty"`
	// Step, when set, makes the values Min, Min+Step, Min+2*Step... up to Max. Grid
	// search needs it for float parameters; an int parameter's step defaults to 1.
	Step float64 `json:"step,omitempty"`
	// Log samples on a log scale (Min must be > 0), for learning rates and penalties.
	Log bool `json:"log,omitempty"`
	// Values are a categorical parameter's choices: strings, numbers or booleans.
	// A choice that is a number is passed as a number in DLC_PARAMS.
	Values []CategoricalValue `json:"values,omitempty" jsonschema:"maxItems=256,maxLength=256"`
	// Condition makes the parameter active only when an earlier parameter has one of
	// some values or a value in a range: momentum only with optimizer sgd. An inactive
	// parameter is not in the trial's DLC_PARAMS, and ${params.NAME} is empty for it.
	Condition *ParameterCondition `json:"condition,omitempty"`
}

// ParameterCondition is when a parameter is active: Parameter (an earlier one of the
// search space, itself active) has one of In (a categorical parameter's choices, or an
// int parameter's values) or a value within [Min, Max] (numeric parameters).
type ParameterCondition struct {
	// Parameter names an earlier parameter of the search space.
	Parameter string `json:"parameter" jsonschema:"maxLength=63,pattern=^[A-Za-z_][A-Za-z0-9_-]*$"`
	// In are the values of Parameter for which this one is active.
	In []CategoricalValue `json:"in,omitempty" jsonschema:"maxItems=256,maxLength=256"`
	// Min and Max bound a numeric Parameter's value for which this one is active.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// CategoricalValue is one choice of a categorical parameter. It is written as a
// string, a number or a boolean and held as its text.
type CategoricalValue string

// UnmarshalJSON accepts a string, a number or a boolean.
func (v *CategoricalValue) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		return nil
	case strings.HasPrefix(s, `"`):
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		*v = CategoricalValue(str)
	case s == "true" || s == "false":
		*v = CategoricalValue(s)
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return errors.New("must be a string, a number or a boolean")
		}
		*v = CategoricalValue(n.String())
	}
	return nil
}

// JSONValue is the choice as it goes into DLC_PARAMS: a number when the text is one,
// true or false for a boolean, else a string.
func (v CategoricalValue) JSONValue() any {
	s := string(v)
	if f, err := strconv.ParseFloat(s, 64); err == nil && json.Valid([]byte(s)) {
		return f
	}
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	return s
}

// JSONSchema accepts a string, a number or a boolean.
func (CategoricalValue) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		{Type: "string", MaxLength: uint64p(256)},
		{Type: "number"},
		{Type: "boolean"},
	}}
}

// ObjectiveDirection says whether smaller or larger values are better.
type ObjectiveDirection string

// Directions.
const (
	Minimize ObjectiveDirection = "minimize"
	Maximize ObjectiveDirection = "maximize"
)

// ObjectiveSpec is what the search optimises.
type ObjectiveSpec struct {
	// Metric is the name of the metric the trials report (`dlc:metric accuracy=0.91`).
	// A trial's value is the aggregate of the values it reported (the last by default).
	// With metrics (a weighted objective) it names the weighted sum, which the trials
	// need not report.
	Metric string `json:"metric" jsonschema:"maxLength=128,pattern=^[A-Za-z0-9_.:/-]+$"`
	// Direction is minimize or maximize.
	Direction ObjectiveDirection `json:"direction" jsonschema:"enum=minimize,enum=maximize"`
	// Goal, when set, ends the experiment as soon as a trial completes with a value at
	// least this good; the trials still running are stopped.
	Goal *float64 `json:"goal,omitempty"`
	// StepMetric is the reported metric that numbers the intermediate values (epoch,
	// step...) which early stopping compares; default step. A report without it is
	// numbered by its position.
	StepMetric string `json:"stepMetric,omitempty" jsonschema:"maxLength=128,pattern=^[A-Za-z0-9_.:/-]+$"`
	// Aggregate makes a trial's value out of the values it reported: last (the
	// default), best (by direction), mean, min or max. Single objective only.
	Aggregate ObjectiveAggregate `json:"aggregate,omitempty" jsonschema:"enum=last,enum=best,enum=mean,enum=min,enum=max"`
	// Metrics, when set, make the objective a weighted one: a trial's value is the sum
	// of each metric's aggregate times its weight (2 to 8 metrics; single objective,
	// no early stopping).
	Metrics []WeightedMetric `json:"metrics,omitempty" jsonschema:"maxItems=8"`
}

// ObjectiveAggregate says how a trial's reported values make its value.
type ObjectiveAggregate string

// Aggregates.
const (
	AggregateLast ObjectiveAggregate = "last"
	AggregateBest ObjectiveAggregate = "best"
	AggregateMean ObjectiveAggregate = "mean"
	AggregateMin  ObjectiveAggregate = "min"
	AggregateMax  ObjectiveAggregate = "max"
)

// ObjectiveAggregates are the aggregates an objective accepts.
var ObjectiveAggregates = []ObjectiveAggregate{AggregateLast, AggregateBest, AggregateMean, AggregateMin, AggregateMax}

// WeightedMetric is one term of a weighted objective.
type WeightedMetric struct {
	// Metric is a metric the trials report.
	Metric string `json:"metric" jsonschema:"maxLength=128,pattern=^[A-Za-z0-9_.:/-]+$"`
	// Weight multiplies the metric's aggregate; a negative weight counts against the
	// objective. Not zero.
	Weight float64 `json:"weight"`
}

// IsZero reports whether the objective is unset (comparable fields and no metrics).
func (o *ObjectiveSpec) IsZero() bool {
	return o.Metric == "" && o.Direction == "" && o.Goal == nil && o.StepMetric == "" &&
		o.Aggregate == "" && len(o.Metrics) == 0
}

// Weighted reports whether the objective is a weighted sum of metrics.
func (o *ObjectiveSpec) Weighted() bool { return len(o.Metrics) > 0 }

// WarmStartSpec names earlier experiments whose completed trials the algorithm sees as
// if they were this experiment's: those whose parameters are a point of this search
// space, from experiments with the same objective metric and direction. They are read
// once, when the experiment starts, and kept in its state; they are not its trials
// (not counted, never its best).
type WarmStartSpec struct {
	// Experiments are the earlier experiments' names, in this workspace (1 to 8).
	Experiments []string `json:"experiments" jsonschema:"minItems=1,maxItems=8,maxLength=40,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
}

// WarmStartStatus is what a warm start read.
type WarmStartStatus struct {
	// Trials is how many earlier trials the algorithm sees.
	Trials int `json:"trials"`
	// Notes say, per earlier experiment, how many trials were used and why others were
	// not ("tune-v1: 12 completed trial(s) used, 3 outside this search space").
	Notes []string `json:"notes,omitempty"`
}

// ConstraintSpec bounds a metric the trials report. A trial that completes is feasible
// when the last value it reported of Metric is within [Min, Max]; one that did not
// report it is infeasible.
type ConstraintSpec struct {
	// Metric is the name of the reported metric (`dlc:metric peak_memory_gb=14.2`).
	Metric string `json:"metric" jsonschema:"maxLength=128,pattern=^[A-Za-z0-9_.:/-]+$"`
	// Max is the largest feasible value.
	Max *float64 `json:"max,omitempty"`
	// Min is the smallest feasible value.
	Min *float64 `json:"min,omitempty"`
}

// Violation is how far v is outside the constraint's bounds: 0 within them (hpo's
// convention: at or below zero the constraint holds).
func (c *ConstraintSpec) Violation(v float64) float64 {
	out := 0.0
	if c.Max != nil && v > *c.Max {
		out += v - *c.Max
	}
	if c.Min != nil && v < *c.Min {
		out += *c.Min - v
	}
	return out
}

// Better reports whether objective value a is better than b.
func (o *ObjectiveSpec) Better(a, b float64) bool {
	if o.Direction == Minimize {
		return a < b
	}
	return a > b
}

// Reached reports whether v meets the goal (false without one).
func (o *ObjectiveSpec) Reached(v float64) bool {
	if o.Goal == nil {
		return false
	}
	if o.Direction == Minimize {
		return v <= *o.Goal
	}
	return v >= *o.Goal
}

// AlgorithmName names a search algorithm.
type AlgorithmName string

// Search algorithms.
const (
	AlgorithmGrid   AlgorithmName = "grid"
	AlgorithmRandom AlgorithmName = "random"
	AlgorithmTPE    AlgorithmName = "tpe"
	// AlgorithmCMAES is CMA-ES with IPOP restarts, for numeric parameters.
	AlgorithmCMAES AlgorithmName = "cmaes"
	// AlgorithmGP is Bayesian optimisation with a Gaussian process.
	AlgorithmGP AlgorithmName = "gp"
	// AlgorithmHyperband is random search in Hyperband brackets.
	AlgorithmHyperband AlgorithmName = "hyperband"
	// AlgorithmBOHB is BOHB: a TPE model inside Hyperband brackets.
	AlgorithmBOHB AlgorithmName = "bohb"
	// AlgorithmNSGA2 is NSGA-II, for several objectives.
	AlgorithmNSGA2 AlgorithmName = "nsga2"
	// AlgorithmPBT is population-based training on the trials' checkpoints.
	AlgorithmPBT AlgorithmName = "pbt"
)

// Algorithms lists every search algorithm.
var Algorithms = []AlgorithmName{AlgorithmGrid, AlgorithmRandom, AlgorithmTPE, AlgorithmCMAES,
	AlgorithmGP, AlgorithmHyperband, AlgorithmBOHB, AlgorithmNSGA2, AlgorithmPBT}

// AlgorithmSpec selects and seeds the search algorithm.
type AlgorithmSpec struct {
	// Name is grid (every combination, in order), random, tpe (Tree-structured Parzen
	// Estimator), cmaes (CMA-ES with restarts), gp (Gaussian-process Bayesian
	// optimisation), hyperband (random search in Hyperband brackets), bohb (TPE in
	// Hyperband brackets), nsga2 (NSGA-II, for several objectives) or pbt
	// (population-based training, see pbt); default tpe, or nsga2 with objectives.
	// hyperband and bohb need earlyStopping rule hyperband (the default for them) with
	// a maxResource.
	Name AlgorithmName `json:"name,omitempty" jsonschema:"enum=grid,enum=random,enum=tpe,enum=cmaes,enum=gp,enum=hyperband,enum=bohb,enum=nsga2,enum=pbt"`
	// Seed makes the suggestions reproducible: the same seed, space and trial results
	// give the same parameters. Unset (0), the experiment picks one and reports it in
	// its status.
	Seed int64 `json:"seed,omitempty"`
	// StartupTrials: tpe suggests at random until this many trials have finished
	// (completed or pruned), then models them; gp until this many have completed;
	// bohb until this many (and one more than the parameters) have a value at some
	// budget; default 10.
	StartupTrials *int32 `json:"startupTrials,omitempty" jsonschema:"minimum=0,maximum=1000"`
	// Multivariate makes tpe model the parameters jointly rather than one at a time.
	Multivariate bool `json:"multivariate,omitempty"`
	// ConstantLiar makes tpe count the trials still running as bad ones, so that
	// trials suggested while others run spread out.
	ConstantLiar bool `json:"constantLiar,omitempty"`
	// PopulationSize is cmaes's first population (default 4+⌊ln(numeric parameters)⌋;
	// each restart doubles it) or nsga2's (default 20).
	PopulationSize int32 `json:"populationSize,omitempty" jsonschema:"minimum=0,maximum=1000"`
	// PBT configures algorithm pbt (required by it).
	PBT *PBTSpec `json:"pbt,omitempty"`
}

// EarlyStoppingRule names an early-stopping rule.
type EarlyStoppingRule string

// Early-stopping rules.
const (
	EarlyStoppingNone   EarlyStoppingRule = "none"
	EarlyStoppingMedian EarlyStoppingRule = "median"
	EarlyStoppingASHA   EarlyStoppingRule = "asha"
	// EarlyStoppingHyperband runs each trial in one of Hyperband's brackets of ASHA.
	EarlyStoppingHyperband EarlyStoppingRule = "hyperband"
)

// EarlyStoppingRules lists every early-stopping rule.
var EarlyStoppingRules = []EarlyStoppingRule{EarlyStoppingNone, EarlyStoppingMedian, EarlyStoppingASHA, EarlyStoppingHyperband}

// EarlyStoppingSpec configures the rule that stops trials doing badly. Trial N is
// compared only with trials 0 to N-parallelism, which have all finished when trial N
// starts, so the decisions, like the suggestions, do not depend on timing.
type EarlyStoppingSpec struct {
	// Rule is none, median, asha or hyperband; default none (hyperband for algorithms
	// hyperband and bohb). median stops a trial whose best value so far is worse than
	// the median of the completed trials' values at the same step. asha (asynchronous
	// successive halving) places rungs at steps minResource * reductionFactor^k and
	// stops a trial that, when it crosses a rung, is not in the best 1/reductionFactor
	// of the trials that crossed it. hyperband gives each trial one of Hyperband's
	// brackets, which are asha started at minResource * reductionFactor^b, and compares
	// it with the trials of its bracket only; it needs maxResource.
	Rule EarlyStoppingRule `json:"rule,omitempty" jsonschema:"enum=none,enum=median,enum=asha,enum=hyperband"`
	// MinResource is asha's (hyperband's) first rung; default 1.
	MinResource int64 `json:"minResource,omitempty" jsonschema:"minimum=0"`
	// ReductionFactor is asha's (hyperband's) η, from 2 to 10; default 3.
	ReductionFactor int32 `json:"reductionFactor,omitempty" jsonschema:"minimum=0,maximum=10"`
	// MaxResource is the step at which asha (hyperband) trials end, if known (hyperband
	// needs it): no rung is placed at or past it.
	MaxResource int64 `json:"maxResource,omitempty" jsonschema:"minimum=0"`
	// WarmupSteps: median stops no trial before this step; default 0.
	WarmupSteps int64 `json:"warmupSteps,omitempty" jsonschema:"minimum=0"`
	// StartupTrials: median stops nothing before this many trials have completed;
	// default 5.
	StartupTrials *int32 `json:"startupTrials,omitempty" jsonschema:"minimum=0,maximum=1000"`
}

// ExperimentPhase is where an experiment is in its life cycle.
type ExperimentPhase string

// Experiment phases. Succeeded and Failed are terminal; a Stopped experiment can be
// resumed while its workflow waits (see docs/experiments.md).
const (
	ExperimentPending   ExperimentPhase = "Pending"
	ExperimentRunning   ExperimentPhase = "Running"
	ExperimentStopping  ExperimentPhase = "Stopping"
	ExperimentStopped   ExperimentPhase = "Stopped"
	ExperimentSucceeded ExperimentPhase = "Succeeded"
	ExperimentFailed    ExperimentPhase = "Failed"
)

// Terminal reports whether the phase is final.
func (p ExperimentPhase) Terminal() bool {
	return p == ExperimentSucceeded || p == ExperimentFailed
}

// TrialPhase is where one trial is.
type TrialPhase string

// Trial phases. Completed, Pruned and Failed are final; a Stopped trial (stopped with
// its experiment) runs again, with the same parameters, when the experiment resumes.
const (
	TrialPending   TrialPhase = "Pending"
	TrialRunning   TrialPhase = "Running"
	TrialCompleted TrialPhase = "Completed"
	TrialPruned    TrialPhase = "Pruned"
	TrialFailed    TrialPhase = "Failed"
	TrialStopped   TrialPhase = "Stopped"
)

// Final reports whether the trial's outcome is known for good.
func (p TrialPhase) Final() bool {
	return p == TrialCompleted || p == TrialPruned || p == TrialFailed
}

// TrialReport is one intermediate objective value of a trial.
type TrialReport struct {
	Step  int64   `json:"step"`
	Value float64 `json:"value"`
}

// TrialStatus is one trial as the experiment reports it.
type TrialStatus struct {
	// ID numbers the trials from 0 in the order they were suggested.
	ID int `json:"id"`
	// Job is the name of the trial's (latest) TrainingJob.
	Job string `json:"job"`
	// Attempts is how many jobs the trial ran (more than one after retries).
	Attempts int        `json:"attempts"`
	Phase    TrialPhase `json:"phase"`
	// Params are the trial's parameter values: numbers, or the chosen categorical
	// values.
	Params map[string]any `json:"params"`
	// Value is the trial's objective: the aggregate of its reports (objective.aggregate:
	// the last value by default), or a weighted objective's sum (for a pruned trial, up
	// to the step where it was stopped). With objectives, the first one's last value.
	Value *float64 `json:"value,omitempty"`
	// Values are, with objectives, the last reported value of each objective metric.
	Values map[string]float64 `json:"values,omitempty"`
	// Constraints are, with spec.constraints, the last reported value of each
	// constraint's metric.
	Constraints map[string]float64 `json:"constraints,omitempty"`
	// Feasible is, with spec.constraints, whether a completed trial met every one (a
	// missing metric does not).
	Feasible *bool `json:"feasible,omitempty"`
	// Enqueued is set when the trial's parameters were enqueued (dlc experiment
	// enqueue) rather than suggested by the algorithm.
	Enqueued bool `json:"enqueued,omitempty"`
	// Step is the step of the last report counted.
	Step int64 `json:"step,omitempty"`
	// Reports are the intermediate values, at most 50 (thinned evenly beyond).
	Reports    []TrialReport `json:"reports,omitempty"`
	Message    string        `json:"message,omitempty"`
	StartTime  *time.Time    `json:"startTime,omitempty"`
	FinishTime *time.Time    `json:"finishTime,omitempty"`
	// PBT is, with algorithm pbt, where the trial stands in the population's lineage.
	PBT *TrialLineage `json:"pbt,omitempty"`
}

// ExperimentStatus is what the Experiment workflow reports through its status query.
type ExperimentStatus struct {
	Phase   ExperimentPhase `json:"phase"`
	Reason  string          `json:"reason,omitempty"`
	Message string          `json:"message,omitempty"`
	// Seed is the algorithm's seed: the spec's, or the one picked when it had none.
	Seed int64 `json:"seed"`
	// MaxTrials is the current limit: the spec's, raised by extend.
	MaxTrials int `json:"maxTrials"`
	// Trials are every trial suggested so far, by ID.
	Trials []TrialStatus `json:"trials"`
	// BestTrial is the ID of the best completed trial, if any.
	BestTrial *int `json:"bestTrial,omitempty"`
	// BestValue and BestParams repeat the best trial's value and parameters.
	BestValue  *float64       `json:"bestValue,omitempty"`
	BestParams map[string]any `json:"bestParams,omitempty"`
	// ParetoFront lists, with objectives, the IDs of the completed trials that no other
	// completed trial beats on every objective, in ID order (the best trial is unset).
	ParetoFront []int `json:"paretoFront,omitempty"`
	// Queued are the enqueued parameter sets not yet run, in the order they will run.
	Queued []map[string]any `json:"queued,omitempty"`
	// WarmStart is, with spec.warmStart, what the algorithm took from the earlier
	// experiments.
	WarmStart *WarmStartStatus `json:"warmStart,omitempty"`
	// Counts of trials by phase.
	Running   int `json:"running"`
	Completed int `json:"completed"`
	Pruned    int `json:"pruned"`
	Failed    int `json:"failed"`
	// Runs is how many workflow runs the experiment has had (continue-as-new).
	Runs       int        `json:"runs"`
	StartTime  *time.Time `json:"startTime,omitempty"`
	FinishTime *time.Time `json:"finishTime,omitempty"`
}
