package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Elastic jobs (spec.elastic). torchrun's c10d rendezvous lets nodes join and leave a
// running job, as in Kubeflow's elastic PyTorchJob, so the workflow changes an elastic
// gang one replica at a time and the others run on:
//
//   - The scale update (UpdateScale) sets the job's replica count within
//     [minReplicas, maxReplicas] while it runs: the gang's elastic role (worker, or the
//     only role) gets replicas added or removed (activity ScaleGang), the others keep
//     running, and later attempts launch the new count.
//   - A lost replica (failed, killed, its pod deleted or its node gone) is replaced
//     alone, same name and rank slot (activity ReplaceReplica), when the failure rules
//     would have restarted the job for it: it uses up one restart (one preemption for
//     a preemption), as a whole-gang restart would, and counts in
//     status.elastic.replacements. A failure the rules do not retry, or one past the
//     budget, ends the attempt as for any job. Non-elastic jobs restart the whole gang.
//
// Both record status.elastic, a Running timeline entry and status event (reason Scaled
// or ReplicaReplaced) and the Scaled condition.

// ScaleRequest is the scale update's argument. The service converts the API's request
// to it; its JSON is what recorded histories hold, so it must not change.
type ScaleRequest struct {
	// Replicas is the job's replica count in all roles, within spec.elastic's
	// [minReplicas, maxReplicas].
	Replicas int32 `json:"replicas"`
}

// ScaleResult is the scale update's answer: the job's replica count once the scale is
// applied.
type ScaleResult struct {
	DesiredReplicas int32            `json:"desiredReplicas"`
	CurrentReplicas int32            `json:"currentReplicas"`
	Phase           schemas.JobPhase `json:"phase"`
}

// scaleRequests are the scale update's requests, which the running attempt applies
// between two gang watches.
type scaleRequests struct {
	// ch receives a value when a scale is asked.
	ch workflow.Channel
	// asked numbers the scale requests, applied the last one applied; lastErr is the
	// last scale's error, for the requests it answers.
	asked, applied int
	lastErr        string
}

// setupScale sets the scale update. It rejects, in its validator, a job that is not
// elastic or not Running and a count outside [minReplicas, maxReplicas], each naming
// the field replicas, so a rejected scale changes nothing and leaves no history.
func (w *jobWorkflow) setupScale(ctx workflow.Context) error {
	w.scale.ch = workflow.NewBufferedChannel(ctx, 1)
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateScale,
		func(ctx workflow.Context, req ScaleRequest) (ScaleResult, error) {
			w.scale.asked++
			ticket := w.scale.asked
			w.status.Elastic.DesiredReplicas = req.Replicas
			w.scale.ch.SendAsync(true)
			if err := workflow.Await(ctx, func() bool { return w.scale.applied >= ticket || w.status.Phase.Terminal() }); err != nil {
				return ScaleResult{}, err
			}
			res := ScaleResult{Phase: w.status.Phase}
			if e := w.status.Elastic; e != nil {
				res.DesiredReplicas, res.CurrentReplicas = e.DesiredReplicas, e.CurrentReplicas
			}
			if w.scale.applied >= ticket && w.scale.lastErr != "" {
				return res, fmt.Errorf("replicas: %s", w.scale.lastErr)
			}
			return res, nil
		},
		workflow.UpdateHandlerOptions{Validator: w.validateScale},
	)
}

// validateScale is the scale update's validator.
func (w *jobWorkflow) validateScale(req ScaleRequest) error {
	job := &w.in.Job
	if job.Spec.Elastic == nil {
		return fmt.Errorf("replicas: job %s is not elastic (it has no spec.elastic)", job.Metadata.Name)
	}
	if w.status.Phase != schemas.JobRunning || w.status.Elastic == nil {
		return fmt.Errorf("replicas: job %s is %s; only a Running job can be scaled", job.Metadata.Name, w.status.Phase)
	}
	_, err := backend.ScaledJob(job, req.Replicas)
	return err
}

// gangJob is the job as the next gang runs it: the spec with the replica count of the
// last scale.
func (w *jobWorkflow) gangJob() schemas.TrainingJob {
	e := w.status.Elastic
	if e == nil || w.in.Job.Spec.Elastic == nil || int(e.DesiredReplicas) == w.in.Job.Spec.TotalReplicas() {
		return w.in.Job
	}
	job, err := backend.ScaledJob(&w.in.Job, e.DesiredReplicas)
	if err != nil {
		return w.in.Job // validated when asked; unreachable
	}
	return job
}

// startElastic records, for an elastic job, its replica count as its first attempt
// starts.
func (w *jobWorkflow) startElastic() {
	if w.in.Job.Spec.Elastic != nil && w.status.Elastic == nil {
		n := int32(w.in.Job.Spec.TotalReplicas())
		w.status.Elastic = &schemas.ElasticStatus{DesiredReplicas: n}
	}
}

// launchedElastic records the replica count of a launched gang.
func (w *jobWorkflow) launchedElastic() {
	if e := w.status.Elastic; e != nil {
		e.CurrentReplicas = int32(len(w.status.Replicas))
	}
	w.scale.applied = w.scale.asked // a new gang runs the desired count
}

// gangParams are the running attempt's gang parameters, for the replicas it creates
// while it runs.
func (a *attempt) gangParams() backend.GangParams {
	w := a.w
	return backend.GangParams{
		Ref: a.ref, UID: w.uid, Params: w.in.Params,
		ResumeFrom: a.plan.resumeFrom, ExcludeNodes: slices.Clone(w.status.ExcludedNodes), Pool: a.plan.pool,
		PodDefaults: w.podDefaults,
	}
}

// applyScale brings the running gang to the desired replica count.
func (a *attempt) applyScale(ctx workflow.Context) {
	w, ref := a.w, a.ref
	ticket := w.scale.asked
	defer func() { w.scale.applied = ticket }()
	w.scale.lastErr = ""
	e := w.status.Elastic
	if e == nil || e.DesiredReplicas == e.CurrentReplicas {
		return
	}
	before := knownNames(w.status.Replicas)
	from := e.CurrentReplicas
	res, err := call[activities.ElasticResult](withShortActivity(ctx), ActivityScaleGang,
		activities.ScaleGangInput{Job: w.gangJob(), Params: a.gangParams()})
	if err != nil {
		w.scale.lastErr = rootMessage(err)
		w.setCondition(ctx, schemas.ConditionScaled, schemas.ConditionFalse, ReasonScaleFailed, w.scale.lastErr)
		w.logger.Warn("scale failed", "gang", ref.ID(), "error", err)
		return
	}
	w.status.Replicas = res.Replicas
	e.CurrentReplicas = int32(len(res.Replicas))
	msg := fmt.Sprintf("scaled from %d to %d replicas", from, e.CurrentReplicas)
	w.setCondition(ctx, schemas.ConditionScaled, schemas.ConditionTrue, ReasonScaled, msg)
	w.transition(ctx, jobOutcome{schemas.JobRunning, ReasonScaled, msg})
	a.forwardNewLogs(ctx, res.Replicas, before)
}

// replaceLost replaces, one at a time, the failed replicas of a running elastic job
// that the failure rules would restart the job for, within the restart budget. What it
// leaves failed ends the attempt as usual.
func (a *attempt) replaceLost(ctx workflow.Context) {
	w := a.w
	job := &w.in.Job
	if job.Spec.Elastic == nil || w.status.Phase != schemas.JobRunning || w.status.Elastic == nil {
		return
	}
	for range len(w.status.Replicas) {
		i := slices.IndexFunc(w.status.Replicas, func(r schemas.ReplicaStatus) bool { return r.Phase == schemas.ReplicaFailed })
		if i < 0 {
			return
		}
		r := w.status.Replicas[i]
		if !a.replaceOne(ctx, r) {
			return
		}
	}
}

// replaceOne replaces one failed replica; false when it did not (not retried by the
// rules, out of budget, or the backend failed), leaving the failure to end the attempt.
func (a *attempt) replaceOne(ctx workflow.Context, r schemas.ReplicaStatus) bool {
	w := a.w
	job := &w.in.Job
	class := r.Reason
	if class == "" {
		class = schemas.FailureUnclassified
	}
	_, why := w.replicaFailure(r)
	f := failure{replica: &r, class: class, message: why, at: workflow.Now(ctx)}
	class, action, _ := classify(job, f, a.logResult.Matches)
	ft := job.Spec.FaultTolerance
	maxPreempt := int(ft.MaxPreemptions)
	if maxPreempt == 0 {
		maxPreempt = defaultMaxPreempt
	}
	switch {
	case action == actionFail,
		action == actionPreemption && w.status.Preemptions >= maxPreempt,
		action == actionRetry && w.status.Restarts >= int(ft.MaxRestarts):
		return false
	}
	if ft.ExcludesFailedNodes() && excludesNode(class) {
		w.exclude(r.Node)
	}
	w.status.ExitCode = nil
	before := knownNames(w.status.Replicas)
	res, err := call[activities.ElasticResult](withShortActivity(ctx), ActivityReplaceReplica,
		activities.ReplaceReplicaInput{Job: w.gangJob(), Params: a.gangParams(), Replica: r.Name})
	if err != nil {
		w.logger.Warn("replica replacement failed; the attempt ends", "replica", r.Name, "error", err)
		return false
	}
	if action == actionPreemption {
		w.status.Preemptions++
	} else {
		w.status.Restarts++
	}
	w.status.Elastic.Replacements++
	w.status.Replicas = res.Replicas
	w.status.Elastic.CurrentReplicas = int32(len(res.Replicas))
	msg := fmt.Sprintf("replica %s replaced (%s: %s); the other replicas run on; %s %d",
		r.Name, class, why, actionNoun(action), w.actionCount(action))
	w.setCondition(ctx, schemas.ConditionScaled, schemas.ConditionTrue, ReasonReplicaReplaced, msg)
	w.transition(ctx, jobOutcome{schemas.JobRunning, ReasonReplicaReplaced, msg})
	delete(before, r.Name)
	a.forwardNewLogs(ctx, res.Replicas, before)
	return true
}

func actionNoun(action string) string {
	if action == actionPreemption {
		return "preemption"
	}
	return "restart"
}

// knownNames is the set of the replicas' names.
func knownNames(reps []schemas.ReplicaStatus) map[string]bool {
	m := make(map[string]bool, len(reps))
	for _, r := range reps {
		m[r.Name] = true
	}
	return m
}

// forwardNewLogs starts a log forwarder for the replicas not in before (added, or
// replaced: removed from before by the caller). It resumes after the last line the
// stream holds for each.
func (a *attempt) forwardNewLogs(ctx workflow.Context, reps []schemas.ReplicaStatus, before map[string]bool) {
	w := a.w
	if !w.in.Job.Spec.Logs.ForwardLogs() {
		return
	}
	var fresh []schemas.ReplicaStatus
	for _, r := range reps {
		if !before[r.Name] {
			fresh = append(fresh, r)
		}
	}
	if len(fresh) == 0 {
		return
	}
	in := activities.ForwardLogsInput{Ref: a.ref, UID: w.uid, Replicas: fresh, LogPatterns: logPatterns(&w.in.Job)}
	w.withCollectors(&in, false)
	a.extraLogs = append(a.extraLogs, forwardLogs(ctx, in))
}

// waitExtraLogs waits, for a bounded time, for the forwarders of added and replaced
// replicas.
func (a *attempt) waitExtraLogs(ctx workflow.Context) {
	for _, f := range a.extraLogs {
		a.waitQuietly(ctx, f)
	}
	a.extraLogs = nil
}

// waitQuietly waits for one extra forwarder (waitForwarder); its result (metrics,
// matches) adds nothing the attempt's forwarder does not have.
func (a *attempt) waitQuietly(ctx workflow.Context, f future[activities.ForwardLogsResult]) {
	w := a.w
	a.waitForwarder(ctx, f.Future, func() {
		if _, err := f.get(ctx); err != nil {
			w.logger.Warn("log forwarding failed", "error", err)
		}
	})
}
