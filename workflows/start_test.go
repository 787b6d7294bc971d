package workflows_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/opendlc/opendlc/workflows"
)

// TestQuotaStartOptions checks the options both quota starters use: the workspace's
// quota workflow id, the caller's task queue, and a running quota workflow used as it is
// (update-with-start requires a conflict policy; signal-with-start's default is the same).
func TestQuotaStartOptions(t *testing.T) {
	o := workflows.QuotaStartOptions(workflows.QuotaWorkflowID("vision"), "q1")
	if o.ID != "dlc/vision/quota" || o.TaskQueue != "q1" {
		t.Errorf("id, task queue = %q, %q; want dlc/vision/quota, q1", o.ID, o.TaskQueue)
	}
	if o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING || o.WorkflowExecutionErrorWhenAlreadyStarted {
		t.Errorf("conflict policy %v, error when started %v; want USE_EXISTING, false", o.WorkflowIDConflictPolicy, o.WorkflowExecutionErrorWhenAlreadyStarted)
	}
	s := workflows.QuotaStart("vision")
	if s.WorkflowType != workflows.QuotaWorkflowName || !cmp.Equal(s.Input, workflows.QuotaView{Workspace: "vision"}) {
		t.Errorf("QuotaStart = %s %+v; want %s with an empty view of vision", s.WorkflowType, s.Input, workflows.QuotaWorkflowName)
	}
}
