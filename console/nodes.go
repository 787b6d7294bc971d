package console

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/workflows"
)

// Node-health events the nodes page reads: those of the last nodesWindow, the latest
// nodeEventsShown of them listed.
const (
	nodesWindow     = 7 * 24 * time.Hour
	nodeEventsShown = 100
)

// nodeCheck is one node-health verdict: a pre-flight check of a job's nodes, or the
// self-healing workflow's re-check of a quarantined node.
type nodeCheck struct {
	Time time.Time
	events.NodeHealthData
}

// nodeRow is a node's latest verdict and how many it had.
type nodeRow struct {
	nodeCheck
	Verdicts int
}

// nodesData is the nodes page's.
type nodesData struct {
	// Visible says the session may read node health: node-health events belong to no
	// workspace (they are published under the reserved workspace "system"), and the
	// API serves them only to a token of every workspace.
	Visible bool
	Nodes   []nodeRow
	// Quarantined are the nodes whose latest verdict quarantined them.
	Quarantined []nodeRow
	Recent      []nodeCheck
	// Healer is the self-healing workflow's state (GET /v1/node-healer); HasHealer
	// says the session may read it (a cluster administrator), Healer nil then says it
	// is not running.
	HasHealer bool
	Healer    *api.NodeHealer
	Days      int
}

// nodesPage shows the nodes' health: each node's latest verdict and its checks, the
// quarantined nodes, the latest verdicts, and the self-healing workflow's rounds.
// The verdicts are the node-health events, read through the API with the session's
// token from the reserved workspace "system": a token of one workspace gets the API's
// refusal, and the page says that node health is shown to administrators. The
// workflow's state (GET /v1/node-healer) is asked for only with a token of every
// workspace with the admin role, the only one the API answers it to.
func (c *Console) nodesPage(w http.ResponseWriter, r *http.Request, k *call) error {
	ctx := r.Context()
	// The page's own workspace first: another workspace's path is the API's 404.
	if _, err := k.api.GetWorkspace(ctx, k.ws); err != nil {
		return err
	}
	d := nodesData{Days: int(nodesWindow / (24 * time.Hour))}
	var checks []nodeCheck
	err := k.api.Events(ctx, workflows.NodeEventsWorkspace, client.EventOptions{Type: events.TypeNodeHealth, Since: nodesWindow},
		func(ev events.Event) error {
			var nh events.NodeHealthData
			if json.Unmarshal(ev.Data, &nh) == nil && nh.Node != "" {
				checks = append(checks, nodeCheck{Time: ev.Time, NodeHealthData: nh})
			}
			return nil
		})
	if ae, ok := errors.AsType[*client.Error](err); ok && (ae.Status == http.StatusNotFound || ae.Status == http.StatusForbidden) {
		return c.render(w, http.StatusOK, "nodes", "", k.page("Nodes", "nodes", d))
	}
	if err != nil {
		return err
	}
	d.Visible = true
	d.Nodes, d.Quarantined = latestVerdicts(checks)
	d.Recent = checks
	if len(d.Recent) > nodeEventsShown {
		d.Recent = d.Recent[len(d.Recent)-nodeEventsShown:]
	}
	d.Recent = slices.Clone(d.Recent)
	slices.Reverse(d.Recent)
	if k.s.who.Workspace == api.AllWorkspaces && auth.Allows(k.s.who.Role, auth.VerbAdmin) {
		h, err := k.api.NodeHealer(ctx)
		if err != nil {
			return err
		}
		d.HasHealer = true
		if h.Running {
			d.Healer = h
		}
	}
	return c.render(w, http.StatusOK, "nodes", "", k.page("Nodes", "nodes", d))
}

// latestVerdicts returns each node's latest verdict, sorted by node, and those that
// quarantined their node. checks are in time order.
func latestVerdicts(checks []nodeCheck) (nodes, quarantined []nodeRow) {
	byNode := map[string]*nodeRow{}
	for _, ch := range checks {
		row := byNode[ch.Node]
		if row == nil {
			row = &nodeRow{}
			byNode[ch.Node] = row
		}
		row.nodeCheck = ch
		row.Verdicts++
	}
	for _, row := range byNode {
		nodes = append(nodes, *row)
	}
	slices.SortFunc(nodes, func(a, b nodeRow) int { return cmp.Compare(a.Node, b.Node) })
	for _, row := range nodes {
		if row.Status == workflows.NodeStatusQuarantined {
			quarantined = append(quarantined, row)
		}
	}
	return nodes, quarantined
}
