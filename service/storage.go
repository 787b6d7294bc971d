package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

// SetStorage makes every start (jobs, experiments, pipeline runs, schedules) and every
// trigger apply refuse a document that names an S3 location outside its workspace's
// (storage.Check): a schemas.ErrorList naming each field, and nothing is created. Call
// it after the front end has set Triggers. Default: no check.
func (s *Service) SetStorage(p *storage.Policy) {
	s.Jobs.storage = p
	if s.Triggers != nil {
		s.Triggers.check = func(ctx context.Context, t *schemas.Trigger) error {
			return checkStorage(ctx, p, t.Metadata.Workspace, t)
		}
	}
}

// checkStorage checks doc's S3 URIs against the workspace's locations; nil p checks
// nothing.
func checkStorage(ctx context.Context, p *storage.Policy, ws string, doc any) error {
	if p == nil {
		return nil
	}
	err := p.CheckDocument(ctx, ws, doc)
	if _, ok := errors.AsType[schemas.ErrorList](err); ok || err == nil {
		return err
	}
	return fmt.Errorf("check storage locations of workspace %s: %w", ws, err)
}
