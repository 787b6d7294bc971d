package service

import (
	"context"
	"fmt"

	"github.com/opendlc/opendlc/runs"
)

// SetRunRecords makes deletes remove run records: a job's purge removes the run's
// record, an experiment's or a pipeline run's delete removes the records of every run
// of its name, and the records of their trials and steps (runs.Store.Delete).
func (s *Service) SetRunRecords(store runs.Store) { s.Jobs.records = store }

// deleteRecords removes the records of a name's runs (of one run, uid), when records
// are kept.
func (t *temporalBase) deleteRecords(ctx context.Context, kind runs.Kind, ws, name, uid string) error {
	if t.records == nil {
		return nil
	}
	if _, err := t.records.Delete(ctx, ws, kind, name, uid); err != nil {
		return fmt.Errorf("delete the run records of %s %s/%s: %w", kind, ws, name, err)
	}
	return nil
}
