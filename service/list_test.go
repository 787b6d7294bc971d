package service

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A listed execution shows its name, phase, run id and times; one closed in a phase
// that is not final was terminated and shows as failed, one still open has no end.
func TestListed(t *testing.T) {
	start, end := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 5, 1, 11, 0, 0, 0, time.UTC)
	exec := func(phase string, closed bool) *workflow.WorkflowExecutionInfo {
		dc := converter.GetDefaultDataConverter()
		name, _ := dc.ToPayload("train")
		ph, _ := dc.ToPayload(phase)
		e := &workflow.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{RunId: "r1"},
			StartTime: timestamppb.New(start),
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				workflows.SearchAttrName: name, workflows.SearchAttrPhase: ph}},
		}
		if closed {
			e.CloseTime = timestamppb.New(end)
		}
		return e
	}
	jobFinal := schemas.JobPhase.Terminal
	expFinal := func(p schemas.ExperimentPhase) bool { return p.Terminal() || p == schemas.ExperimentStopped }

	open := listed(exec("Running", false), jobFinal, schemas.JobFailed)
	if open.Name != "train" || open.UID != "r1" || !open.Start.Equal(start) || open.End != nil || open.Phase != schemas.JobRunning {
		t.Errorf("open job = %+v, want train r1 Running from %s with no end", open, start)
	}
	terminated := listed(exec("Running", true), jobFinal, schemas.JobFailed)
	if terminated.End == nil || !terminated.End.Equal(end) || terminated.Phase != schemas.JobFailed {
		t.Errorf("terminated job = %+v, want Failed ending %s", terminated, end)
	}
	if r := listed(exec("Succeeded", true), jobFinal, schemas.JobFailed); r.Phase != schemas.JobSucceeded {
		t.Errorf("succeeded job shows %s", r.Phase)
	}
	if r := listed(exec("Stopped", true), expFinal, schemas.ExperimentFailed); r.Phase != schemas.ExperimentStopped {
		t.Errorf("stopped experiment shows %s, want Stopped", r.Phase)
	}
	if r := listed(exec("Running", true), schemas.PipelinePhase.Terminal, schemas.PipelineFailed); r.Phase != schemas.PipelineFailed {
		t.Errorf("terminated pipeline shows %s, want Failed", r.Phase)
	}
}
