package service

import (
	"context"
	"fmt"
	"strconv"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// Trials answers an experiment's trials, by ID; with phase set, only the trials in
// that phase (Running, Completed, Pruned, Failed...).
func (s *Experiments) Trials(ctx context.Context, ws, name string, phase string) (api.TrialList, error) {
	d, err := s.Get(ctx, ws, name)
	if err != nil {
		return api.TrialList{}, err
	}
	out := api.TrialList{Experiment: name, UID: d.UID, Items: []schemas.TrialStatus{}, BestTrial: d.Status.BestTrial}
	for _, t := range d.Status.Trials {
		if phase == "" || string(t.Phase) == phase {
			out.Items = append(out.Items, t)
		}
	}
	return out, nil
}

// Trial answers one trial of an experiment by its ID (a decimal number); ErrNotFound
// when the experiment has no such trial (yet).
func (s *Experiments) Trial(ctx context.Context, ws, name, id string) (schemas.TrialStatus, error) {
	n, err := strconv.Atoi(id)
	if err != nil || n < 0 {
		return schemas.TrialStatus{}, invalid("invalid trial id", "trial", "must be a trial's ID, an integer from 0")
	}
	d, err := s.Get(ctx, ws, name)
	if err != nil {
		return schemas.TrialStatus{}, err
	}
	for _, t := range d.Status.Trials {
		if t.ID == n {
			return t, nil
		}
	}
	return schemas.TrialStatus{}, &Error{Kind: ErrNotFound,
		Message: fmt.Sprintf("experiment %s in workspace %s has no trial %d (%d trials so far)", name, ws, n, len(d.Status.Trials))}
}
