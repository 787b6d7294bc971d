package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/schemas"
)

// ExperimentQuerier queries workflows: the part of a Temporal client that reads another
// experiment's status for a warm start.
type ExperimentQuerier interface {
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
}

// WarmStartInput names the earlier experiments whose trials seed a new one: their
// workflow ids and the status query's name.
type WarmStartInput struct {
	Sources []WarmStartSourceRef `json:"sources"`
	Query   string               `json:"query"`
}

// WarmStartSourceRef is one earlier experiment.
type WarmStartSourceRef struct {
	Name       string `json:"name"`
	WorkflowID string `json:"workflowId"`
}

// WarmStartResult is, per source in order, its objectives and finished trials, or why
// it could not be read.
type WarmStartResult struct {
	Sources []WarmStartSource `json:"sources"`
}

// WarmStartSource is what a warm start takes from one earlier experiment.
type WarmStartSource struct {
	Name string `json:"name"`
	// Err says why the source was not read (not found).
	Err        string                  `json:"err,omitempty"`
	Objectives []schemas.ObjectiveSpec `json:"objectives,omitempty"`
	Trials     []schemas.TrialStatus   `json:"trials,omitempty"`
}

// experimentView mirrors the Experiment workflow's status query answer (workflows'
// ExperimentView, which this package cannot import).
type experimentView struct {
	Experiment schemas.Experiment       `json:"experiment"`
	Status     schemas.ExperimentStatus `json:"status"`
}

// ReadWarmStart reads the completed trials of earlier experiments through their status
// query (Temporal answers it for a closed workflow too, within the namespace's
// retention). A source that does not exist is reported, not an error; any other
// failure is retried.
func (a *ExperimentActivities) ReadWarmStart(ctx context.Context, in WarmStartInput) (WarmStartResult, error) {
	if a.Experiments == nil {
		return WarmStartResult{}, errors.New("warm start: the worker has no Temporal client to read experiments with")
	}
	var out WarmStartResult
	for _, src := range in.Sources {
		res := WarmStartSource{Name: src.Name}
		v, err := a.Experiments.QueryWorkflow(ctx, src.WorkflowID, "", in.Query)
		var view experimentView
		if err == nil {
			err = v.Get(&view)
		}
		if _, nf := errors.AsType[*serviceerror.NotFound](err); nf {
			res.Err = fmt.Sprintf("experiment %s not found", src.Name)
			out.Sources = append(out.Sources, res)
			continue
		}
		if err != nil {
			return WarmStartResult{}, fmt.Errorf("warm start: read experiment %s: %w", src.Name, err)
		}
		res.Objectives = view.Experiment.Spec.AllObjectives()
		for _, t := range view.Status.Trials {
			if t.Phase == schemas.TrialCompleted && t.Value != nil {
				t.Reports, t.PBT = nil, nil
				res.Trials = append(res.Trials, t)
			}
		}
		out.Sources = append(out.Sources, res)
	}
	return out, nil
}
