package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
)

// Bounds of a read of a workspace's audit records (GET /v1/workspaces/{ws}/audit): the
// records of the last AuditWindow at most, the latest AuditRecords of them.
const (
	AuditWindow  = 7 * 24 * time.Hour
	AuditRecords = 50
)

// Audit reads a workspace's audit records (events.TypeAudit) from the audit stream
// (jetstream.AuditStream, subject dlc.<ws>.audit), where the API server publishes one
// per mutating call.
type Audit struct {
	ev *jetstream.Client
}

// NewAudit returns the audit service over ev.
func NewAudit(ev *jetstream.Client) *Audit { return &Audit{ev: ev} }

// Latest returns up to limit of workspace ws's latest audit records from the last
// window, newest first. window is bounded by AuditWindow and limit by AuditRecords
// (ErrInvalid outside them); zero takes the bound. Unreadable records are skipped.
func (a *Audit) Latest(ctx context.Context, ws string, window time.Duration, limit int) (api.AuditList, error) {
	if window == 0 {
		window = AuditWindow
	}
	if limit == 0 {
		limit = AuditRecords
	}
	if window < 0 || window > AuditWindow {
		return api.AuditList{}, invalid(fmt.Sprintf("invalid since %s: audit records are read from the last %s at most", window, AuditWindow),
			"since", fmt.Sprintf("must be a positive duration of at most %s", AuditWindow))
	}
	if limit < 0 || limit > AuditRecords {
		return api.AuditList{}, invalid(fmt.Sprintf("invalid limit %d: at most %d audit records are answered", limit, AuditRecords),
			"limit", fmt.Sprintf("must be an integer between 1 and %d", AuditRecords))
	}
	var ring []api.AuditRecord
	err := a.ev.ReadSince(ctx, jetstream.AuditStream, events.AuditSubject(ws), time.Now().Add(-window), nil,
		func(_ string, data []byte) error {
			var ev events.Event
			var d events.AuditData
			if json.Unmarshal(data, &ev) != nil || json.Unmarshal(ev.Data, &d) != nil {
				return nil //nolint:nilerr // unreadable: skip it
			}
			ring = append(ring, api.AuditRecord{ID: ev.ID, Time: ev.Time, AuditData: d})
			if len(ring) > limit {
				ring = ring[len(ring)-limit:]
			}
			return nil
		})
	if err != nil {
		return api.AuditList{}, fmt.Errorf("read the audit records of workspace %s: %w", ws, err)
	}
	if ring == nil {
		ring = []api.AuditRecord{}
	}
	slices.Reverse(ring)
	return api.AuditList{Items: ring}, nil
}
