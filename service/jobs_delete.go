package service

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/workflows"
)

// SetHistory keeps deleted jobs readable (JobHistory): Delete hides a job from the
// listings and from Get but keeps its record, events and logs; Purge removes them.
// Without it, Delete purges.
func (s *Service) SetHistory(h *JobHistory) { s.Jobs.history = h }

// DeleteOptions say how a job is deleted.
type DeleteOptions struct {
	// Purge removes everything: the workflow's history, the events, the log records and
	// the log archive. Without it the job leaves the listings, its name can be used
	// again, and its record, events and logs stay readable by uid (GetRun) for the
	// namespace's retention.
	Purge bool
}

// Delete deletes a job (Purge removes everything; DeleteOptions). A running job is
// stopped first, and Delete waits until its workflow has ended: its replicas are
// stopped and cleaned up, its terminal event is published and its logs archived,
// before its record goes. A job already deleted is not found; Purge also finds it.
func (s *Jobs) Delete(ctx context.Context, ws, name string, o ...DeleteOptions) error {
	purge := len(o) > 0 && o[0].Purge
	if s.history == nil {
		purge = true
	}
	id := workflows.JobWorkflowID(ws, name)
	desc, err := s.describe(ctx, "job", ws, name, id)
	if err != nil {
		return err
	}
	exec := desc.GetWorkflowExecutionInfo().GetExecution()
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if _, err := s.stop(ctx, ws, name, workflows.StopRequest{Reason: "deleted"}); err != nil {
			return fmt.Errorf("stop job before delete: %w", err)
		}
	}
	// The stop update answers once the job is terminal; the workflow then cleans the
	// gang up, archives the logs and publishes its last events before it ends.
	if err := s.tc.GetWorkflow(ctx, id, exec.GetRunId()).Get(ctx, nil); err != nil && ctx.Err() != nil {
		return fmt.Errorf("wait for job %s/%s to end: %w", ws, name, ctx.Err())
	}
	view, err := s.query(ctx, ws, name)
	if err != nil {
		return fmt.Errorf("read job before delete: %w", err)
	}
	lastRun := s.lastRunID(ctx, id)
	if !purge {
		return s.softDelete(ctx, ws, name, view.UID, lastRun)
	}
	if err := s.deleteRuns(ctx, id); err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	if err := s.waitDeleted(ctx, id); err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	if err := s.deleteRecords(ctx, runs.KindJob, ws, name, view.UID); err != nil {
		return err
	}
	if s.history == nil {
		return nil
	}
	if err := s.history.purge(ctx, ws, name, view.UID, view.Status.LogArchive); err != nil {
		return err
	}
	return s.history.forget(ctx, ws, view.UID, lastRun)
}

// lastRunID is the run id of a job's newest execution. It differs from the job's uid
// (its first run's id) once the job continued as new; listings name the job by it.
func (s *Jobs) lastRunID(ctx context.Context, id string) string {
	desc, err := s.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return ""
	}
	return desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// softDelete records the run as deleted under its uid and, when the job continued as
// new, under its last run's id too (which listings show); a run deleted before is not
// found.
func (s *Jobs) softDelete(ctx context.Context, ws, name, uid, lastRun string) error {
	deleted, err := s.history.isDeleted(ctx, ws, uid)
	if err != nil {
		return err
	}
	if deleted {
		return notFound("job", ws, name)
	}
	if lastRun != "" && lastRun != uid {
		if err := s.history.markDeleted(ctx, ws, name, lastRun); err != nil {
			return err
		}
	}
	return s.history.markDeleted(ctx, ws, name, uid)
}

// GetDeleted answers a job by name as Get does, deleted or not (the newest run of the
// name).
func (s *Jobs) GetDeleted(ctx context.Context, ws, name string) (api.Job, error) {
	return getView(ctx, "job", ws, name, s.query)
}

// GetRun answers one run of a job, by its uid, deleted or not, for as long as Temporal
// keeps it (the namespace's retention).
func (s *Jobs) GetRun(ctx context.Context, ws, name, uid string) (api.Job, error) {
	id := workflows.JobWorkflowID(ws, name)
	run, err := s.chainEnd(ctx, id, uid)
	var v converter.EncodedValue
	if err == nil {
		v, err = s.tc.QueryWorkflow(ctx, id, run, workflows.QueryStatus)
	}
	var jv workflows.JobView
	if err == nil {
		err = v.Get(&jv)
	}
	if err != nil {
		if isNotFound(err) {
			return api.Job{}, &Error{Kind: ErrNotFound, Message: fmt.Sprintf("job %s has no run %s in workspace %s", name, uid, ws)}
		}
		return api.Job{}, fmt.Errorf("query job: %w", err)
	}
	return api.Job{UID: jv.UID, Spec: jv.Job, Status: jv.Status}, nil
}

// chainEnd is the last run of the chain that starts at run uid: a job that continued
// as new (workflows/continue_as_new.go) answers its status from its last run.
func (s *Jobs) chainEnd(ctx context.Context, id, uid string) (string, error) {
	run := uid
	for range maxChainRuns {
		desc, err := s.tc.DescribeWorkflowExecution(ctx, id, run)
		if err != nil {
			return "", err
		}
		if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			return run, nil
		}
		it := s.tc.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		ev, err := it.Next()
		if err != nil {
			return "", err
		}
		next := ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		if next == "" {
			return run, nil
		}
		run = next
	}
	return run, nil
}

// maxChainRuns bounds how many runs chainEnd follows.
const maxChainRuns = 10000

// hideDeleted answers not found for a deleted run.
func (s *Jobs) hideDeleted(ctx context.Context, ws, name, uid string) error {
	if s.history == nil {
		return nil
	}
	deleted, err := s.history.isDeleted(ctx, ws, uid)
	if err != nil {
		return err
	}
	if deleted {
		return notFound("job", ws, name)
	}
	return nil
}

// withoutDeleted leaves the deleted runs out of a listing.
func (s *Jobs) withoutDeleted(ctx context.Context, ws string, items []api.JobSummary) ([]api.JobSummary, error) {
	if s.history == nil {
		return items, nil
	}
	out := items[:0]
	for _, it := range items {
		deleted, err := s.history.isDeleted(ctx, ws, it.UID)
		if err != nil {
			return nil, err
		}
		if !deleted {
			out = append(out, it)
		}
	}
	return out, nil
}

// reuseDeletedName tells whether a new job may take the name of an existing one: when
// the name's newest run has ended and was deleted, it sets the start's id reuse policy
// so that the start may reuse its workflow id, and answers true.
func (s *Jobs) reuseDeletedName(ctx context.Context, spec *workflows.StartSpec, ws, name string) (bool, error) {
	if s.history == nil {
		return false, nil
	}
	desc, err := s.tc.DescribeWorkflowExecution(ctx, spec.ID, "")
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("start job: %w", err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, nil
	}
	view, err := s.query(ctx, ws, name)
	if err != nil {
		return false, fmt.Errorf("start job: read the previous run: %w", err)
	}
	deleted, err := s.history.isDeleted(ctx, ws, view.UID)
	if err != nil || !deleted {
		return false, err
	}
	spec.Reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	return true, nil
}
