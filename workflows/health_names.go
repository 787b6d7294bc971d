package workflows

// Wire names of the node health checks and of the node self-healing workflow.
const (
	// ActivityCheckNodes runs a job attempt's pre-flight node health check
	// (backend.CheckNodesInput → backend.CheckNodesResult).
	ActivityCheckNodes = "CheckNodes"
	// ActivityRecheckQuarantined re-checks the quarantined nodes whose backoff has
	// passed and releases the healthy ones (activities.RecheckQuarantinedInput →
	// activities.RecheckQuarantinedResult).
	ActivityRecheckQuarantined = "RecheckQuarantined"

	// NodeHealthWorkflowName is the node self-healing workflow: one per cluster, id
	// NodeHealthWorkflowID, started by every worker whose backend checks nodes.
	NodeHealthWorkflowName = "NodeHealth"
	// NodeHealthWorkflowID is the self-healing workflow's one id.
	NodeHealthWorkflowID = "dlc/system/node-health"
	// QueryNodeHealth returns the self-healing workflow's NodeHealthState.
	QueryNodeHealth = "node-health"
)
