package console

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/service"
	"github.com/opendlc/opendlc/workflows"
)

// The API serves neither audit records nor the node self-healing workflow's state, so
// the console reads them where the API server's own layers keep them: the audit stream
// of JetStream and the NodeHealth workflow's query. The pages that show them check
// the session's identity themselves (see workspacePage and nodesPage).

// AuditReader returns up to limit of a workspace's latest audit records
// (events.TypeAudit) from the last window, newest first.
type AuditReader func(ctx context.Context, ws string, window time.Duration, limit int) ([]events.Event, error)

// NodeHealthReader returns the node self-healing workflow's state; nil when the
// workflow is not running (the backend does not check nodes).
type NodeHealthReader func(ctx context.Context) (*workflows.NodeHealthState, error)

// AuditFromJetStream reads audit records from the audit stream (DLC_AUDIT) of js.
func AuditFromJetStream(js *jetstream.Client) AuditReader {
	return func(ctx context.Context, ws string, window time.Duration, limit int) ([]events.Event, error) {
		var ring []events.Event
		err := js.ReadSince(ctx, jetstream.AuditStream, events.AuditSubject(ws), time.Now().Add(-window), nil,
			func(_ string, data []byte) error {
				var ev events.Event
				if json.Unmarshal(data, &ev) != nil {
					return nil //nolint:nilerr // unreadable: skip it
				}
				ring = append(ring, ev)
				if len(ring) > limit {
					ring = ring[len(ring)-limit:]
				}
				return nil
			})
		slices.Reverse(ring)
		return ring, err
	}
}

// NodeHealthFromTemporal reads the node self-healing workflow's state (id
// workflows.NodeHealthWorkflowID) through tc, as the API's nodes service does
// (service.Nodes.Healer).
func NodeHealthFromTemporal(tc tclient.Client) NodeHealthReader {
	return service.NewNodes(tc, nil).Healer
}
