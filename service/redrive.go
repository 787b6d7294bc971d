package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/notify"
)

// Redrives sends notification rules' dead letters again (notify.Redriver).
type Redrives struct {
	r *notify.Redriver
}

// NewRedrives is the redrive service over r.
func NewRedrives(r *notify.Redriver) *Redrives { return &Redrives{r: r} }

// Redrive queues the dead letters of rule name in ws for delivery again, each once
// however often it is asked: at most req.Limit (default and at most 1000), written at or
// after req.Since (RFC 3339) when given. An unknown rule is ErrNotFound; a bad limit or
// time is ErrInvalid naming the field.
func (s *Redrives) Redrive(ctx context.Context, ws, name string, req api.RedriveRequest) (*api.RedriveResult, error) {
	if req.Limit < 0 || req.Limit > notify.MaxRedrive {
		d := fmt.Sprintf("must be from 1 to %d", notify.MaxRedrive)
		return nil, invalid("limit: "+d, "limit", d)
	}
	var since time.Time
	if req.Since != "" {
		var err error
		if since, err = time.Parse(time.RFC3339, req.Since); err != nil {
			const d = "must be an RFC 3339 time such as 2026-01-02T15:04:05Z"
			return nil, invalid("since: "+d, "since", d)
		}
	}
	res, err := s.r.Redrive(ctx, ws, name, req.Limit, since)
	switch {
	case errors.Is(err, notify.ErrNotFound), errors.Is(err, notify.ErrInvalidName):
		return nil, notFound("notification rule", ws, name)
	case errors.Is(err, notify.ErrInvalidRedrive):
		return nil, invalid(err.Error(), "limit", strings.TrimPrefix(err.Error(), notify.ErrInvalidRedrive.Error()+": "))
	case err != nil:
		return nil, fmt.Errorf("redrive rule: %w", err)
	}
	return res, nil
}
