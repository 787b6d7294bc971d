package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// maxQuotaRedirects bounds how many times one admission request follows a quota
// workflow's answer to ask another (workspace → cohort, or back while a workspace
// leaves its cohort).
const maxQuotaRedirects = 4

// ReasonQuotaPreempted is the reason of a job the quota preempted (a cohort reclaimed what its
// workspace borrowed, or a job of higher priority took its place); it is requeued.
const ReasonQuotaPreempted = "QuotaPreempted"

// admitToQuota asks the workspace's quota workflow to admit the job and waits, in
// Queued, until it does. It returns false with the job's terminal outcome when the job
// is stopped while it waits, or when it alone asks for more than the quota. A
// workspace in a cohort answers with its cohort's quota workflow, which the job then
// asks (and later releases).
func (w *jobWorkflow) admitToQuota(ctx workflow.Context) (jobOutcome, bool) {
	job := &w.in.Job
	info := workflow.GetInfo(ctx)
	asked := workflow.Now(ctx)
	decisions := workflow.GetSignalChannel(ctx, SignalQuotaDecision)
	// A job asks again after a preemption: that is a new request (the update id
	// names it), to the workspace's quota first.
	updateID := w.uid + ":quota"
	if w.quotaAsks > 0 {
		updateID = fmt.Sprintf("%s:quota:%d", w.uid, w.quotaAsks)
	}
	w.quotaAsks++
	w.quotaLedger = ""
	ask := func(ledger string) (QuotaDecision, error) {
		start := QuotaStart(job.Metadata.Workspace)
		if c, ok := cohortOfQuotaID(ledger); ok {
			start = CohortQuotaStart(c)
		}
		return requestQuota(ctx, activities.RequestQuotaInput{
			WorkflowID:   start.ID,
			WorkflowType: start.WorkflowType,
			TaskQueue:    info.TaskQueueName,
			UpdateName:   UpdateQuotaRequest,
			UpdateID:     updateID,
			Request: QuotaRequest{
				JobID: info.WorkflowExecution.ID, Priority: w.quotaPriority(), Resources: jobDemand(job),
				Workspace: job.Metadata.Workspace,
			},
			InitialState: start.Input,
		})
	}
	d, err := ask(QuotaWorkflowID(job.Metadata.Workspace))
	for hops := 0; err == nil && d.Ledger != "" && hops < maxQuotaRedirects; hops++ {
		w.quotaLedger = d.Ledger
		d, err = ask(d.Ledger)
	}
	switch {
	case err != nil:
		return jobOutcome{schemas.JobFailed, ReasonQuotaUnavailable, "could not reach the workspace quota: " + rootMessage(err)}, false
	case d.Ledger != "":
		return jobOutcome{schemas.JobFailed, ReasonQuotaUnavailable, "the quota kept sending the job elsewhere: " + d.Message}, false
	}
	w.quotaRequested = true
	for !d.Granted {
		if d.Rejected {
			return jobOutcome{schemas.JobFailed, ReasonQuotaExceeded, d.Message}, false
		}
		if d.Ledger != "" {
			// The workspace left its cohort while the job waited there: ask again.
			w.quotaRequested = false
			return w.admitToQuota(ctx)
		}
		if w.status.Phase != schemas.JobQueued || w.status.Message != d.Message {
			w.transition(ctx, jobOutcome{schemas.JobQueued, ReasonQuotaExceeded, d.Message})
		}
		stopped := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(decisions, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &d) })
		sel.AddReceive(w.stopCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); stopped = true })
		sel.Select(ctx)
		if stopped {
			return w.stopped(), false
		}
	}
	msg := "admitted by the workspace quota"
	if w.quotaLedger != "" {
		msg = "admitted by the quota of cohort " + cohortName(w.quotaLedger)
	}
	if d.Message != "" {
		msg += ": " + d.Message
	}
	w.setCondition(ctx, schemas.ConditionAdmitted, schemas.ConditionTrue, "QuotaGranted", msg)
	w.recordAdmissionWait(ctx, asked)
	return jobOutcome{}, true
}

func cohortName(ledger string) string {
	c, _ := cohortOfQuotaID(ledger)
	return c
}

// releaseQuota gives the job's share back (or leaves the queue) to the quota workflow
// that admitted it. If the signal cannot be delivered, the quota workflow's sweep
// returns the share.
func (w *jobWorkflow) releaseQuota(ctx workflow.Context) {
	id := w.quotaLedger
	if id == "" {
		id = QuotaWorkflowID(w.in.Job.Metadata.Workspace)
	}
	err := workflow.SignalExternalWorkflow(ctx, id, "", SignalQuotaRelease,
		QuotaRelease{JobID: workflow.GetInfo(ctx).WorkflowExecution.ID}).Get(ctx, nil)
	if err != nil {
		w.logger.Warn("could not release the workspace quota", "error", err)
	}
	w.quotaRequested = false
}

// quotaPriority is the priority the job asks with: its spec's, or the one last set
// with `dlc job priority` (the SignalJobPriority signal), so that a job requeued after
// a preemption keeps the priority it was given while it waited.
func (w *jobWorkflow) quotaPriority() int32 {
	var p int32
	for w.priorityCh.ReceiveAsync(&p) {
		w.priority = &p
	}
	if w.priority != nil {
		return *w.priority
	}
	return w.in.Job.Spec.Resources.Priority
}

// takePreemption reports, without blocking, whether a preemption notice is pending,
// and keeps it.
func (w *jobWorkflow) takePreemption() bool {
	var n QuotaPreemptNotice
	if !w.preemptCh.ReceiveAsync(&n) {
		return false
	}
	w.preempted = &n
	return true
}

// preemptedOutcome is an attempt's outcome when the quota preempted it: not a
// failure; the job is requeued (requeue).
func (w *jobWorkflow) preemptedOutcome() jobOutcome {
	return jobOutcome{"", ReasonQuotaPreempted, w.preempted.Message}
}

// requeue follows a quota preemption: the attempt's gang was stopped (its replicas got
// SIGTERM and the grace period to write a final checkpoint, and are gone), so the job
// gives its share back, waits in Queued to be admitted again, and the next attempt
// resumes from the newest complete checkpoint. A preemption is not a failure: it
// counts in status.preemptions, not against maxRestarts or maxPreemptions. It returns
// false with the job's outcome when the job ends instead (stopped while queued).
func (w *jobWorkflow) requeue(ctx workflow.Context, a *attempt) (bool, jobOutcome) {
	n := w.preempted
	w.preempted = nil
	rec := w.currentAttempt()
	rec.Class, rec.Action, rec.Message = schemas.FailurePreempted, actionPreemption, n.Message
	released := workflow.Now(ctx)
	rec.ReleasedTime = &released
	rec.Outcome = schemas.JobQueued
	w.status.Preemptions++
	w.cleanup(ctx, a.ref)
	w.releaseQuota(ctx)
	// A notice sent twice must not preempt the next admission.
	for w.preemptCh.ReceiveAsync(nil) {
	}
	// Another workspace's job is not named: its name is that tenant's.
	by := "job " + JobNameOf(n.By)
	if n.ByWorkspace != "" && n.ByWorkspace != w.in.Job.Metadata.Workspace {
		by = "a job of workspace " + n.ByWorkspace
	}
	w.setCondition(ctx, schemas.ConditionAdmitted, schemas.ConditionFalse, n.Reason,
		fmt.Sprintf("attempt %d preempted for %s: %s", a.ref.Attempt, by, n.Message))
	w.transition(ctx, jobOutcome{schemas.JobQueued, ReasonQuotaPreempted,
		fmt.Sprintf("preempted (%s) for %s; requeued, resumes from its newest checkpoint", n.Reason, by)})
	if out, ok := w.admitToQuota(ctx); !ok {
		return false, out
	}
	return true, jobOutcome{}
}

// keptPriority is the priority set with `dlc job priority`, taken in, for
// continue-as-new; nil when none was set.
func (w *jobWorkflow) keptPriority() *int32 {
	w.quotaPriority()
	return w.priority
}
