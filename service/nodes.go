package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/workflows"
)

// NodesWindow is how far back the node-health verdicts are read.
const NodesWindow = 7 * 24 * time.Hour

// Nodes serves the nodes' health and quarantine: each node's latest verdict, from the
// node-health events of JetStream (published by jobs' pre-flight checks, the
// self-healing workflow's re-checks and releases, and administrators' releases) and
// the self-healing workflow's latest round (its query), and the release of a node
// from quarantine (the NodeHealth workflow's release update, which a worker whose
// backend quarantines nodes carries out). Nodes never seen by a check are not listed.
type Nodes struct {
	tc client.Client
	ev *jetstream.Client
}

// NewNodes returns the nodes service over tc and, for the verdicts, ev (nil: only the
// self-healing workflow's state is read).
func NewNodes(tc client.Client, ev *jetstream.Client) *Nodes { return &Nodes{tc: tc, ev: ev} }

// Healer returns the node self-healing workflow's state; nil when it is not running
// (no worker's backend checks nodes).
func (s *Nodes) Healer(ctx context.Context) (*workflows.NodeHealthState, error) {
	v, err := s.tc.QueryWorkflow(ctx, workflows.NodeHealthWorkflowID, "", workflows.QueryNodeHealth)
	if _, ok := errors.AsType[*serviceerror.NotFound](err); ok {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st workflows.NodeHealthState
	if err := v.Get(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// HealerStatus returns the node self-healing workflow's state for the API
// (GET /v1/node-healer): Running false when the workflow is not running.
func (s *Nodes) HealerStatus(ctx context.Context) (api.NodeHealer, error) {
	st, err := s.Healer(ctx)
	if err != nil {
		return api.NodeHealer{}, fmt.Errorf("read the node self-healing workflow: %w", err)
	}
	if st == nil {
		return api.NodeHealer{}, nil
	}
	out := api.NodeHealer{Running: true, Rounds: st.Rounds, Released: st.Released, LastRound: st.LastRound, LastError: st.LastError}
	if st.Interval > 0 {
		out.Interval = st.Interval.String()
	}
	if st.ProbeTimeout > 0 {
		out.ProbeTimeout = st.ProbeTimeout.String()
	}
	for _, h := range st.LastNodes {
		out.LastNodes = append(out.LastNodes, api.NodeRecheck{
			Node: h.Node, Healthy: h.Healthy, Reason: h.Reason, Message: h.Message, CheckedAt: h.CheckedAt,
			Quarantined: h.Quarantined, QuarantinedAt: h.QuarantinedAt, Checks: nodeChecks(h.Checks),
		})
	}
	return out, nil
}

// List returns every node with a verdict in the last NodesWindow, by name.
func (s *Nodes) List(ctx context.Context) (api.NodeList, error) {
	byNode := map[string]*api.Node{}
	if s.ev != nil {
		err := s.ev.ReadSince(ctx, jetstream.EventsStream, "dlc.system.node.*.health", time.Now().Add(-NodesWindow), nil,
			func(_ string, data []byte) error {
				var ev events.Event
				var d events.NodeHealthData
				if json.Unmarshal(data, &ev) != nil || json.Unmarshal(ev.Data, &d) != nil || d.Node == "" {
					return nil //nolint:nilerr // unreadable: skip it
				}
				n := byNode[d.Node]
				if n == nil {
					n = &api.Node{Name: d.Node}
					byNode[d.Node] = n
				}
				n.Status, n.CheckedAt, n.Job, n.Checks = d.Status, ev.Time, d.Job, nodeChecks(d.Checks)
				n.Quarantined = d.Status == workflows.NodeStatusQuarantined
				n.Verdicts++
				return nil
			})
		if err != nil {
			return api.NodeList{}, fmt.Errorf("read node-health events: %w", err)
		}
	}
	// The latest round's re-checks that kept a node quarantined publish no event.
	healer, err := s.Healer(ctx)
	if err != nil {
		return api.NodeList{}, fmt.Errorf("read the node self-healing workflow: %w", err)
	}
	if healer != nil {
		for _, h := range healer.LastNodes {
			n := byNode[h.Node]
			if n == nil {
				n = &api.Node{Name: h.Node}
				byNode[h.Node] = n
			}
			if h.CheckedAt.Before(n.CheckedAt) {
				continue
			}
			n.Status, n.CheckedAt, n.Job, n.Checks = workflows.NodeStatusUnhealthy, h.CheckedAt, "", nodeChecks(h.Checks)
			if h.Healthy {
				n.Status = workflows.NodeStatusHealthy
			}
			n.Quarantined = h.Quarantined
			if len(n.Checks) == 0 {
				n.Checks = []api.NodeCheck{{Name: h.Reason, OK: h.Healthy, Message: h.Message}}
			}
			n.Verdicts++
		}
	}
	out := api.NodeList{Items: []api.Node{}}
	for _, n := range byNode {
		out.Items = append(out.Items, *n)
	}
	slices.SortFunc(out.Items, func(a, b api.Node) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Get returns one node's latest verdict; ErrNotFound when it has none.
func (s *Nodes) Get(ctx context.Context, name string) (api.Node, error) {
	l, err := s.List(ctx)
	if err != nil {
		return api.Node{}, err
	}
	for _, n := range l.Items {
		if n.Name == name {
			return n, nil
		}
	}
	return api.Node{}, &Error{Kind: ErrNotFound, Message: fmt.Sprintf("node %s has no health verdict", name)}
}

// Release releases a node from quarantine on behalf of by, and returns its verdict.
// ErrNotFound: the cluster has no such node; ErrConflict: it is not quarantined, or
// no worker checks nodes (the self-healing workflow is not running).
func (s *Nodes) Release(ctx context.Context, name, by, reason string) (api.Node, error) {
	if name == "" {
		return api.Node{}, invalid("a node name is required", "name", "required")
	}
	h, err := s.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.NodeHealthWorkflowID, UpdateName: workflows.UpdateReleaseNode,
		Args:         []any{workflows.ReleaseNodeRequest{Node: name, By: by, Reason: reason}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if isNotFound(err) {
		return api.Node{}, &Error{Kind: ErrConflict, Message: "no worker checks nodes here: the node self-healing workflow is not running"}
	}
	var res activities.ReleaseNodeResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if ae, ok := errors.AsType[*temporal.ApplicationError](err); ok && ae.Type() == activities.ErrTypeNodeNotFound {
		return api.Node{}, &Error{Kind: ErrNotFound, Message: ae.Message()}
	}
	if err != nil {
		return api.Node{}, fmt.Errorf("release node %s: %w", name, err)
	}
	if !res.Released {
		return api.Node{}, &Error{Kind: ErrConflict, Message: fmt.Sprintf("node %s is not quarantined", name)}
	}
	return api.Node{
		Name: name, Status: workflows.NodeStatusHealthy, CheckedAt: res.Health.CheckedAt, Checks: nodeChecks(res.Health.Checks), Verdicts: 1,
	}, nil
}

// nodeChecks converts a verdict's checks for the API.
func nodeChecks(cs []events.HealthCheck) []api.NodeCheck {
	out := make([]api.NodeCheck, len(cs))
	for i, c := range cs {
		out[i] = api.NodeCheck{Name: c.Name, OK: c.OK, Message: c.Message}
	}
	return out
}
