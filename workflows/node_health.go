package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
)

// Node self-healing: the NodeHealth workflow (one per cluster, id NodeHealthWorkflowID)
// re-checks the quarantined nodes every Interval through the RecheckQuarantined
// activity, which probes those whose backoff has passed and releases the healthy ones;
// each release is published as a node-health event (status Healthy). It continues as new
// every nodeHealthRoundsPerRun rounds, carrying its NodeHealthState.

// Defaults of the node self-healing workflow.
const (
	// DefaultNodeHealthInterval is how often quarantined nodes are looked at. A node is
	// re-checked only once its own backoff has passed (see backend/kube).
	DefaultNodeHealthInterval = time.Minute
	// nodeHealthRoundsPerRun bounds a run's history: about an hour of rounds, ten
	// events each.
	nodeHealthRoundsPerRun = 60
)

// NodeHealthState is the self-healing workflow's input, its query result, and the state
// it carries across continue-as-new.
type NodeHealthState struct {
	// Interval between rounds; zero means DefaultNodeHealthInterval.
	Interval time.Duration `json:"interval,omitempty"`
	// ProbeTimeout bounds each re-check pod; zero means backend.DefaultProbeTimeout.
	ProbeTimeout time.Duration `json:"probeTimeout,omitempty"`
	// Rounds and Released count the rounds run and the nodes released, over every run.
	Rounds   int64 `json:"rounds,omitempty"`
	Released int64 `json:"released,omitempty"`
	// LastRound is when the latest round ended; LastNodes what it re-checked, and
	// LastError why it failed, if it did.
	LastRound *time.Time           `json:"lastRound,omitempty"`
	LastNodes []backend.NodeHealth `json:"lastNodes,omitempty"`
	LastError string               `json:"lastError,omitempty"`
}

// NodeHealthWorkflow re-checks quarantined nodes forever (see NodeHealthState).
func NodeHealthWorkflow(ctx workflow.Context, state NodeHealthState) error {
	w := &nodeHealthWorkflow{state: state, logger: workflow.GetLogger(ctx)}
	if err := workflow.SetQueryHandler(ctx, QueryNodeHealth, func() (NodeHealthState, error) { return w.state, nil }); err != nil {
		return err
	}
	if err := w.setReleaseHandler(ctx); err != nil {
		return err
	}
	interval := w.state.Interval
	if interval <= 0 {
		interval = DefaultNodeHealthInterval
	}
	for round := 1; ; round++ {
		w.round(ctx)
		if round >= nodeHealthRoundsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
			return workflow.NewContinueAsNewError(ctx, NodeHealthWorkflowName, w.state)
		}
		if err := workflow.Sleep(ctx, interval); err != nil {
			return err
		}
	}
}

type nodeHealthWorkflow struct {
	state  NodeHealthState
	logger log.Logger
}

// round re-checks the quarantined nodes that are due and publishes their releases.
func (w *nodeHealthWorkflow) round(ctx workflow.Context) {
	probe := w.state.ProbeTimeout
	if probe <= 0 {
		probe = backend.DefaultProbeTimeout
	}
	res, err := recheckQuarantined(ctx, activities.RecheckQuarantinedInput{ProbeTimeout: probe})
	now := workflow.Now(ctx)
	w.state.Rounds++
	w.state.LastRound = &now
	if err != nil {
		w.state.LastError = rootMessage(err)
		w.logger.Warn("re-checking quarantined nodes failed", "error", err)
		return
	}
	w.state.LastError = ""
	w.state.LastNodes = res.Nodes
	var msgs []events.Msg
	for _, h := range res.Nodes { // sorted by the activity
		if !h.Healthy {
			continue
		}
		w.state.Released++
		m, err := NodeHealthEvent(h, "")
		if err != nil {
			w.logger.Error("could not encode a node-health event", "node", h.Node, "error", err)
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return
	}
	// Published within the round, retried for up to ten minutes.
	if err := publishEvents(ctx, msgs, 10*time.Minute); err != nil {
		w.logger.Error("node-health events not published", "count", len(msgs), "error", err)
	}
}

// Statuses of node-health events (events.NodeHealthData.Status).
const (
	NodeStatusHealthy     = "Healthy"
	NodeStatusUnhealthy   = "Unhealthy"
	NodeStatusQuarantined = "Quarantined"
)

// NodeHealthEvent is the node-health event (events.TypeNodeHealth) of a verdict, for the
// job job ("" for the self-healing workflow's releases). Its status is Healthy,
// Quarantined or Unhealthy. Its id (the Nats-Msg-Id) is the same whenever the same fact
// is published again, so a retried publish or a retried check does not duplicate it:
// a quarantine and its release are keyed by when the quarantine began, any other
// verdict by when it was reached.
func NodeHealthEvent(h backend.NodeHealth, job string) (events.Msg, error) {
	status, key := NodeStatusUnhealthy, h.CheckedAt
	switch {
	case h.Healthy:
		status = NodeStatusHealthy
	case h.Quarantined:
		status = NodeStatusQuarantined
	}
	if h.QuarantinedAt != nil && status != NodeStatusUnhealthy {
		key = *h.QuarantinedAt
	}
	id := fmt.Sprintf("node:%s:%s:%d", h.Node, strings.ToLower(status), key.Unix())
	if job != "" && status != NodeStatusQuarantined {
		id += ":" + job
	}
	checks := h.Checks
	if len(checks) == 0 {
		checks = []events.HealthCheck{{Name: h.Reason, OK: h.Healthy, Message: h.Message}}
	}
	ev, err := events.New(id, events.TypeNodeHealth, NodeEventsWorkspace, "/opendlc/nodes/"+h.Node, h.Node, h.CheckedAt,
		events.NodeHealthData{Node: h.Node, Status: status, Job: job, Checks: checks})
	if err != nil {
		return events.Msg{}, err
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return events.Msg{}, err
	}
	return events.Msg{Subject: NodeHealthSubject(h.Node), ID: id, Data: data}, nil
}

// NodeEventsWorkspace is the reserved workspace of node events: nodes belong to none.
const NodeEventsWorkspace = "system"

// NodeHealthSubject is events.NodeHealthSubject.
func NodeHealthSubject(node string) string { return events.NodeHealthSubject(node) }
