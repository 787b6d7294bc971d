package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// Warm start (spec.warmStart): when the experiment starts, the ReadWarmStart activity
// reads the completed trials of the named earlier experiments; those that fit (same
// objective metric and direction, every parameter of this search space with a value
// inside it) are kept in ExperimentState.Warm, which continue-as-new carries, and the
// sampler sees them before the experiment's own trials, with negative IDs, so they
// never take an ID, a slot or the best.

// MaxWarmTrials bounds the trials a warm start keeps (the newest of each source first
// are kept when the sources hold more).
const MaxWarmTrials = 1000

// WarmTrial is one earlier trial the sampler sees.
type WarmTrial struct {
	Params map[string]float64 `json:"params"`
	Value  float64            `json:"value"`
	// Constraints are its violations of this experiment's constraints (NaN: the
	// earlier trial did not report the metric).
	Constraints []float64 `json:"constraints,omitempty"`
}

// WarmStartState is what the warm start read.
type WarmStartState struct {
	Trials []WarmTrial `json:"trials,omitempty"`
	// Notes say, per source, how many trials were used and why others were not.
	Notes []string `json:"notes,omitempty"`
}

// readWarmStart fills w.st.Warm once, at the first run's start.
func (w *experimentWorkflow) readWarmStart(ctx workflow.Context) {
	ws := w.exp.Spec.WarmStart
	if ws == nil || w.st.Warm != nil {
		return
	}
	in := activities.WarmStartInput{Query: QueryStatus}
	for _, name := range ws.Experiments {
		in.Sources = append(in.Sources, activities.WarmStartSourceRef{
			Name: name, WorkflowID: ExperimentWorkflowID(w.exp.Metadata.Workspace, name)})
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	var res activities.WarmStartResult
	st := &WarmStartState{}
	if err := workflow.ExecuteActivity(actx, ActivityReadWarmStart, in).Get(ctx, &res); err != nil {
		st.Notes = append(st.Notes, "warm start not read: "+err.Error())
	}
	for _, src := range res.Sources {
		st.Notes = append(st.Notes, w.takeWarm(st, src))
	}
	w.st.Warm = st
	w.changed = true
}

// takeWarm adds the trials of one source that fit this experiment and says what it
// took.
func (w *experimentWorkflow) takeWarm(st *WarmStartState, src activities.WarmStartSource) string {
	if src.Err != "" {
		return fmt.Sprintf("%s: not used: %s", src.Name, src.Err)
	}
	mine := w.exp.Spec.AllObjectives()
	if len(src.Objectives) != len(mine) || len(mine) != 1 ||
		src.Objectives[0].Metric != mine[0].Metric || src.Objectives[0].Direction != mine[0].Direction {
		return fmt.Sprintf("%s: not used: its objective (%s) is not this experiment's (%s)",
			src.Name, describeObjectives(src.Objectives), describeObjectives(mine))
	}
	used, outside := 0, 0
	for _, t := range slices.Backward(src.Trials) { // newest first, so a cap keeps the newest
		if len(st.Trials) >= MaxWarmTrials {
			break
		}
		p, err := w.pointOf(t.Params)
		if err != nil || t.Value == nil {
			outside++
			continue
		}
		wt := WarmTrial{Params: p, Value: *t.Value}
		if len(w.exp.Spec.Constraints) > 0 {
			wt.Constraints = w.violationsOf(t.Constraints)
		}
		st.Trials = append(st.Trials, wt)
		used++
	}
	note := fmt.Sprintf("%s: %d completed trial(s) used", src.Name, used)
	if outside > 0 {
		note += fmt.Sprintf(", %d outside this search space", outside)
	}
	return note
}

// addWarm puts the warm-start trials before the experiment's own, with IDs -1, -2...
func (w *experimentWorkflow) addWarm(h *hpo.History) {
	if w.st.Warm == nil || len(w.st.Warm.Trials) == 0 {
		return
	}
	warm := make([]hpo.Trial, 0, len(w.st.Warm.Trials)+len(h.Trials))
	for i, t := range w.st.Warm.Trials {
		v := t.Value
		warm = append(warm, hpo.Trial{ID: -1 - i, Params: t.Params, State: hpo.TrialCompleted, Value: &v, Constraints: t.Constraints})
	}
	h.Trials = append(warm, h.Trials...)
}

func describeObjectives(os []schemas.ObjectiveSpec) string {
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = string(o.Direction) + " " + o.Metric
	}
	return strings.Join(parts, ", ")
}
