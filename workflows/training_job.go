package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
)

// TrainingJobInput starts a TrainingJob workflow.
type TrainingJobInput struct {
	// Job is the validated, defaulted spec.
	Job schemas.TrainingJob `json:"job"`
	// Params are hyper-parameters for an HPO trial; nil for a plain job.
	Params map[string]any `json:"params,omitempty"`
}

// TrainingJobResult is the job's final status.
type TrainingJobResult struct {
	Status schemas.JobStatus `json:"status"`
}

// JobView is what the status query returns: the spec as submitted and the live status.
type JobView struct {
	UID    string              `json:"uid"`
	Job    schemas.TrainingJob `json:"job"`
	Status schemas.JobStatus   `json:"status"`
}

// StopRequest asks a job to stop.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
}

// StopResult is the job's phase once the stop has been handled.
type StopResult struct {
	Phase schemas.JobPhase `json:"phase"`
}

// Timeouts used by the TrainingJob workflow's activities.
const (
	// heartbeatTimeout bounds how long a dead worker holds a long activity.
	heartbeatTimeout = 10 * time.Second
	// watchMaxWait bounds one WatchGang call, so history grows by one activity per
	// watchMaxWait at most while nothing changes.
	watchMaxWait = 10 * time.Minute
	// logDrainTimeout bounds how long a finished job waits for its last log lines.
	logDrainTimeout = 2 * time.Minute
)

// Change ids of workflow.GetVersion branches (see docs/architecture.md).
const (
	// changeRunningBeforeSucceeded: a gang first seen already succeeded passes
	// through Running.
	changeRunningBeforeSucceeded = "running-before-succeeded"
	// changeFrameworkOutcome: each framework's success rule decides (frameworks.Outcome)
	// instead of "any failure fails, all successes succeed".
	changeFrameworkOutcome = "framework-outcome"
	// changeGangPlacement: spec.resources.placementTimeout releases a partly placed
	// gang and retries it after a backoff, in Queued.
	changeGangPlacement = "gang-placement"
	// changeRunningWithToleratedFailures: a gang whose replicas have all started runs,
	// even when the framework's rule tolerates some that already ended (failed).
	changeRunningWithToleratedFailures = "running-with-tolerated-failures"
)

// Gang placement retries.
const (
	reasonPlacementTimeout = "PlacementTimeout"
	placementBackoff       = 5 * time.Second
	maxPlacementBackoff    = 5 * time.Minute
)

// TrainingJobWorkflow runs one training job: Pending → Launching → Running →
// Succeeded | Failed | Stopped. Each transition is recorded in the status timeline and
// published once, in order, as an opendlc.job.phase.v1 event.
func TrainingJobWorkflow(ctx workflow.Context, in TrainingJobInput) (TrainingJobResult, error) {
	w := &jobWorkflow{in: in, logger: workflow.GetLogger(ctx)}
	if err := w.setup(ctx); err != nil {
		return TrainingJobResult{}, err
	}
	return w.run(ctx)
}

// jobWorkflow is the TrainingJob state machine's state.
type jobWorkflow struct {
	in     TrainingJobInput
	logger log.Logger
	uid    string
	status schemas.JobStatus

	// stopCh receives one value when a stop is requested.
	stopCh     workflow.Channel
	stopReason string

	// outbox holds status events not yet published; the publisher goroutine drains it
	// in order.
	outbox     []events.Msg
	eventSeq   int
	publishing bool
	closing    bool

	// quotaRequested is set once the job has asked its workspace's quota workflow for
	// admission: it must give its share back when it ends.
	quotaRequested bool

	// recovery is set for jobs started after failed attempts became recoverable
	// (changeRecovery); failed holds what the current attempt's failure was, and
	// logResult what its log forwarder saw.
	recovery  bool
	failed    *failure
	logResult activities.ForwardLogsResult
	// spotWaitSince is when a spot job was last preempted and has not run since.
	spotWaitSince *time.Time
}

func (w *jobWorkflow) setup(ctx workflow.Context) error {
	w.uid = workflow.GetInfo(ctx).FirstRunID
	w.stopCh = workflow.NewBufferedChannel(ctx, 1)
	w.status = schemas.JobStatus{Phase: schemas.JobPending}

	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (JobView, error) {
		return JobView{UID: w.uid, Job: w.in.Job, Status: w.status}, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateStop,
		func(ctx workflow.Context, req StopRequest) (StopResult, error) {
			if !w.status.Phase.Terminal() && w.stopReason == "" {
				w.stopReason = req.Reason
				if w.stopReason == "" {
					w.stopReason = "stopped by request"
				}
				w.stopCh.SendAsync(true)
			}
			if err := workflow.Await(ctx, func() bool { return w.status.Phase.Terminal() }); err != nil {
				return StopResult{}, err
			}
			return StopResult{Phase: w.status.Phase}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(req StopRequest) error {
			if len(req.Reason) > 1024 {
				return errors.New("reason: must be at most 1024 characters")
			}
			return nil
		}},
	); err != nil {
		return err
	}
	workflow.Go(ctx, w.publishLoop)
	return nil
}

func (w *jobWorkflow) run(ctx workflow.Context) (TrainingJobResult, error) {
	job := &w.in.Job
	now := workflow.Now(ctx)
	w.status.StartTime = &now
	w.setCondition(ctx, schemas.ConditionAccepted, schemas.ConditionTrue, "Validated", "spec accepted")
	w.transition(ctx, schemas.JobPending, "Accepted", "job accepted")

	ref := backend.GangRef{Workspace: job.Metadata.Workspace, Job: job.Metadata.Name, Attempt: 0}
	if job.Spec.Resources.Pool == schemas.PoolQuota &&
		workflow.GetVersion(ctx, changeWorkspaceQuota, workflow.DefaultVersion, 1) == 1 {
		if phase, reason, msg, ok := w.admitToQuota(ctx); !ok {
			w.finish(ctx, ref, phase, reason, msg)
			return TrainingJobResult{Status: w.status}, nil
		}
	}
	w.recovery = workflow.GetVersion(ctx, changeRecovery, workflow.DefaultVersion, 1) == 1
	backoff := placementBackoff
	var phase schemas.JobPhase
	var reason, msg string
	for {
		plan := attemptPlan{}
		if w.recovery {
			var ok bool
			if plan, phase, reason, msg, ok = w.planAttempt(ctx, ref); !ok {
				break
			}
			w.status.Attempts = append(w.status.Attempts, schemas.AttemptRecord{
				Attempt: ref.Attempt, Pool: plan.pool, StartTime: workflow.Now(ctx), ResumedFrom: plan.resumeFrom,
			})
		}
		w.failed, w.logResult = nil, activities.ForwardLogsResult{}
		phase, reason, msg = w.runAttempt(ctx, ref, plan)
		if w.recovery {
			end := workflow.Now(ctx)
			w.currentAttempt().EndTime = &end
			w.currentAttempt().Outcome = phase
		}
		if w.recovery && phase == schemas.JobFailed && w.failed != nil {
			again, p, r, m := w.recover(ctx, ref, *w.failed, phase, reason, msg)
			if !again {
				phase, reason, msg = p, r, m
				break
			}
			if err := workflow.ExecuteActivity(withShortActivity(ctx), ActivityCleanupGang, ref).Get(ctx, nil); err != nil {
				w.logger.Error("cleanup failed", "gang", ref.ID(), "error", err)
			}
			ref.Attempt++
			continue
		}
		if reason != reasonPlacementTimeout {
			break
		}
		if w.recovery {
			w.currentAttempt().Outcome = schemas.JobQueued
		}
		// Not every replica could be placed in time: release them all, wait, try again
		// with a new attempt.
		if err := workflow.ExecuteActivity(withShortActivity(ctx), ActivityCleanupGang, ref).Get(ctx, nil); err != nil {
			w.logger.Error("cleanup failed", "gang", ref.ID(), "error", err)
		}
		w.setCondition(ctx, schemas.ConditionLaunched, schemas.ConditionFalse, reasonPlacementTimeout, msg)
		w.transition(ctx, schemas.JobQueued, reasonPlacementTimeout, fmt.Sprintf("%s; retrying in %s", msg, backoff))
		stopped := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(workflow.NewTimer(ctx, backoff), func(workflow.Future) {})
		sel.AddReceive(w.stopCh, func(c workflow.ReceiveChannel, more bool) { c.Receive(ctx, nil); stopped = true })
		sel.Select(ctx)
		if stopped {
			phase, reason, msg = schemas.JobStopped, "StopRequested", w.stopReason
			break
		}
		backoff = min(2*backoff, maxPlacementBackoff)
		ref.Attempt++
	}

	w.finish(ctx, ref, phase, reason, msg)
	return TrainingJobResult{Status: w.status}, nil
}

// runAttempt launches one attempt and follows it to its end. It returns the job's
// terminal phase with a reason and message.
func (w *jobWorkflow) runAttempt(ctx workflow.Context, ref backend.GangRef, plan attemptPlan) (schemas.JobPhase, string, string) {
	job := &w.in.Job
	if w.stopRequested(ctx) {
		return schemas.JobStopped, "StopRequested", w.stopReason
	}
	w.status.Attempt = ref.Attempt
	w.transition(ctx, schemas.JobLaunching, "Launching", fmt.Sprintf("creating %d replicas", job.Spec.TotalReplicas()))

	var launched activities.LaunchGangResult
	err := workflow.ExecuteActivity(withShortActivity(ctx), ActivityLaunchGang, activities.LaunchGangInput{
		Job: *job,
		Params: backend.GangParams{
			Ref: ref, UID: w.uid, Params: w.in.Params,
			ResumeFrom: plan.resumeFrom, ExcludeNodes: plan.exclude, Pool: plan.pool,
		},
	}).Get(ctx, &launched)
	if err != nil {
		w.failed = &failure{class: schemas.FailureLaunch, message: rootMessage(err), at: workflow.Now(ctx)}
		return schemas.JobFailed, "LaunchFailed", rootMessage(err)
	}
	w.status.Replicas = launched.Replicas
	w.setCondition(ctx, schemas.ConditionLaunched, schemas.ConditionTrue, "ReplicasCreated",
		fmt.Sprintf("%d replicas created", len(launched.Replicas)))

	var logs workflow.Future
	if job.Spec.Logs.ForwardLogs() {
		in := activities.ForwardLogsInput{Ref: ref, UID: w.uid, Replicas: launched.Replicas}
		if w.recovery {
			in.HangTimeout = job.Spec.FaultTolerance.HangTimeout.D()
			in.LogPatterns = logPatterns(job)
		}
		logs = workflow.ExecuteActivity(withLongActivity(ctx), ActivityForwardLogs, in)
	}

	var timeout workflow.Future
	if d := job.Spec.Timeout.D(); d > 0 {
		left := d - workflow.Now(ctx).Sub(*w.status.StartTime)
		timeout = workflow.NewTimer(ctx, max(left, time.Millisecond))
	}

	var placement workflow.Future
	if pt := job.Spec.Resources.PlacementTimeout.D(); pt > 0 &&
		workflow.GetVersion(ctx, changeGangPlacement, workflow.DefaultVersion, 1) == 1 {
		pctx, cancelPlacement := workflow.WithCancel(ctx)
		defer cancelPlacement()
		placement = workflow.NewTimer(pctx, pt)
	}

	var hang workflow.Future
	if w.recovery && job.Spec.FaultTolerance.HangTimeout.D() > 0 {
		hang = logs
	}
	phase, reason, msg := w.follow(ctx, ref, timeout, placement, hang)
	if phase != schemas.JobSucceeded || anyReplicaLive(w.status.Replicas) {
		// Stop whatever still runs: the remaining replicas of a failed gang, or all of
		// them on stop or timeout.
		if err := workflow.ExecuteActivity(withShortActivity(ctx), ActivityStopGang, ref).Get(ctx, nil); err != nil {
			w.logger.Error("stop gang failed", "gang", ref.ID(), "error", err)
		}
		w.refreshReplicas(ctx, ref)
	}
	if logs != nil {
		w.waitLogs(ctx, logs)
	}
	return phase, reason, msg
}

// follow watches the gang until it ends, a stop is requested or the timeout fires, or
// the placement timeout fires before every replica runs (reason
// reasonPlacementTimeout, no phase).
func (w *jobWorkflow) follow(ctx workflow.Context, ref backend.GangRef, timeout, placement, hang workflow.Future) (schemas.JobPhase, string, string) {
	for {
		if phase, reason, msg, done := w.evaluate(ctx); done {
			return phase, reason, msg
		}
		if w.status.Phase != schemas.JobLaunching {
			placement = nil // placed: the placement timeout no longer applies
			if w.recovery && w.spotWaitSince != nil {
				w.spotWaitSince = nil // spot capacity ran the job again
			}
			if w.recovery {
				if rec := w.currentAttempt(); rec.RunningTime == nil {
					now := workflow.Now(ctx)
					rec.RunningTime = &now
				}
			}
		}
		watchCtx, cancelWatch := workflow.WithCancel(ctx)
		watch := workflow.ExecuteActivity(withWatchActivity(watchCtx), ActivityWatchGang, activities.WatchGangInput{
			Ref: ref, Known: w.status.Replicas, MaxWait: watchMaxWait,
		})
		var (
			result    activities.WatchGangResult
			watchErr  error
			stopped   bool
			timedOut  bool
			notPlaced bool
			hung      bool
		)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(watch, func(f workflow.Future) { watchErr = f.Get(ctx, &result) })
		sel.AddReceive(w.stopCh, func(c workflow.ReceiveChannel, more bool) { c.Receive(ctx, nil); stopped = true })
		if timeout != nil {
			sel.AddFuture(timeout, func(workflow.Future) { timedOut = true })
		}
		if placement != nil {
			sel.AddFuture(placement, func(workflow.Future) { notPlaced = true })
		}
		if hang != nil {
			sel.AddFuture(hang, func(f workflow.Future) {
				var res activities.ForwardLogsResult
				if err := f.Get(ctx, &res); err == nil && res.Hung {
					w.logResult, hung = res, true
				}
				hang = nil // done either way: its outcome is read once
			})
		}
		sel.Select(ctx)
		if stopped || timedOut || notPlaced || hung {
			// Wait for the watch to acknowledge the cancellation, so it is not still
			// observing the gang while it is stopped and cleaned up.
			cancelWatch()
			_ = watch.Get(ctx, nil)
			if stopped {
				return schemas.JobStopped, "StopRequested", w.stopReason
			}
			if hung {
				msg := fmt.Sprintf("no replica wrote a line for %s (hangTimeout %s)", w.logResult.Quiet, w.in.Job.Spec.FaultTolerance.HangTimeout.D())
				w.failed = &failure{class: schemas.FailureHang, message: msg, at: workflow.Now(ctx)}
				return schemas.JobFailed, "Hang", msg
			}
			if notPlaced {
				running := 0
				for _, r := range w.status.Replicas {
					if r.Phase == schemas.ReplicaRunning {
						running++
					}
				}
				return "", reasonPlacementTimeout, fmt.Sprintf("only %d of %d replicas were placed within %s",
					running, len(w.status.Replicas), w.in.Job.Spec.Resources.PlacementTimeout.D())
			}
			return schemas.JobFailed, "Timeout", fmt.Sprintf("the job ran longer than its timeout %s", w.in.Job.Spec.Timeout.D())
		}
		cancelWatch()
		if watchErr != nil {
			return schemas.JobFailed, "WatchFailed", rootMessage(watchErr)
		}
		w.status.Replicas = result.Replicas
	}
}

// evaluate applies the success rule to the replicas: any failed replica fails the job,
// all succeeded replicas succeed it, all running ones make it Running.
func (w *jobWorkflow) evaluate(ctx workflow.Context) (schemas.JobPhase, string, string, bool) {
	reps := w.status.Replicas
	if len(reps) == 0 {
		return "", "", "", false
	}
	if workflow.GetVersion(ctx, changeFrameworkOutcome, workflow.DefaultVersion, 1) == 1 {
		return w.evaluateByFramework(ctx)
	}
	running, succeeded := 0, 0
	for _, r := range reps {
		switch r.Phase {
		case schemas.ReplicaFailed, schemas.ReplicaStopped:
			reason, msg := w.replicaFailure(r)
			return schemas.JobFailed, reason, msg, true
		case schemas.ReplicaSucceeded:
			succeeded++
		case schemas.ReplicaRunning:
			running++
		}
	}
	if succeeded == len(reps) {
		// Replicas that finished between two observations did run: record Running so
		// that every successful job's timeline reads the same.
		if w.status.Phase == schemas.JobLaunching &&
			workflow.GetVersion(ctx, changeRunningBeforeSucceeded, workflow.DefaultVersion, 1) == 1 {
			w.markRan(ctx, succeeded)
		}
		return schemas.JobSucceeded, "AllReplicasSucceeded", fmt.Sprintf("%d replicas succeeded", succeeded), true
	}
	if running+succeeded == len(reps) && w.status.Phase == schemas.JobLaunching {
		w.setCondition(ctx, schemas.ConditionRunning, schemas.ConditionTrue, "AllReplicasRunning",
			fmt.Sprintf("%d replicas running", running))
		w.transition(ctx, schemas.JobRunning, "AllReplicasRunning", fmt.Sprintf("%d replicas running", running))
	}
	return "", "", "", false
}

// evaluateByFramework applies the framework's success rule (frameworks.Outcome): for
// example TensorFlow's chief, MPI's launcher or Ray's head decides, while PyTorch needs
// every replica to succeed.
func (w *jobWorkflow) evaluateByFramework(ctx workflow.Context) (schemas.JobPhase, string, string, bool) {
	reps := w.status.Replicas
	fw := w.in.Job.Spec.Framework
	running, succeeded := 0, 0
	for _, r := range reps {
		switch r.Phase {
		case schemas.ReplicaRunning:
			running++
		case schemas.ReplicaSucceeded:
			succeeded++
		}
	}
	phase, by := frameworks.Outcome(fw, reps)
	switch phase {
	case schemas.JobFailed:
		for _, r := range reps {
			if r.Name == by {
				reason, msg := w.replicaFailure(r)
				if w.recovery {
					class := r.Reason
					if class == "" {
						class = schemas.FailureUnclassified
					}
					w.failed = &failure{replica: &r, class: class, message: msg, at: workflow.Now(ctx)}
				}
				return schemas.JobFailed, reason, msg, true
			}
		}
		return schemas.JobFailed, "ReplicaFailed", fmt.Sprintf("replica %s failed", by), true
	case schemas.JobSucceeded:
		if w.status.Phase == schemas.JobLaunching {
			w.markRan(ctx, succeeded)
		}
		if succeeded == len(reps) {
			return schemas.JobSucceeded, "AllReplicasSucceeded", fmt.Sprintf("%d replicas succeeded", succeeded), true
		}
		return schemas.JobSucceeded, "LeaderSucceeded",
			fmt.Sprintf("replica %s succeeded, which decides a %s job; the other replicas are stopped", by, fw), true
	}
	placed := running+succeeded == len(reps)
	if !placed && w.status.Phase == schemas.JobLaunching && running > 0 && !anyReplicaPending(reps) &&
		workflow.GetVersion(ctx, changeRunningWithToleratedFailures, workflow.DefaultVersion, 1) == 1 {
		// Every replica has started and the rule tolerates the ones that ended (a Ray
		// worker, a TF ps that failed while the chief runs): the job runs. Before this,
		// it stayed Launching, and a placement timeout released a gang that was placed.
		placed = true
	}
	if placed && w.status.Phase == schemas.JobLaunching {
		w.setCondition(ctx, schemas.ConditionRunning, schemas.ConditionTrue, "AllReplicasRunning",
			fmt.Sprintf("%d replicas running", running))
		w.transition(ctx, schemas.JobRunning, "AllReplicasRunning", fmt.Sprintf("%d replicas running", running))
	}
	return "", "", "", false
}

// anyReplicaPending reports whether a replica has not started.
func anyReplicaPending(reps []schemas.ReplicaStatus) bool {
	for _, r := range reps {
		if r.Phase == schemas.ReplicaPending || r.Phase == "" {
			return true
		}
	}
	return false
}

// replicaFailure records the exit code of the replica that failed the job and says why.
func (w *jobWorkflow) replicaFailure(r schemas.ReplicaStatus) (reason, msg string) {
	if r.Phase == schemas.ReplicaStopped {
		return "ReplicaStopped", fmt.Sprintf("replica %s was stopped outside the job", r.Name)
	}
	w.status.ExitCode = r.ExitCode
	msg = fmt.Sprintf("replica %s failed", r.Name)
	if r.ExitCode != nil {
		msg += fmt.Sprintf(" with exit code %d", *r.ExitCode)
	}
	if r.Message != "" {
		msg += ": " + r.Message
	}
	return "ReplicaFailed", msg
}

// markRan records Running for replicas first seen already finished: they did run, and
// every successful job's timeline then reads the same.
func (w *jobWorkflow) markRan(ctx workflow.Context, n int) {
	w.setCondition(ctx, schemas.ConditionRunning, schemas.ConditionTrue, "AllReplicasRan",
		fmt.Sprintf("%d replicas ran to completion between two observations", n))
	w.transition(ctx, schemas.JobRunning, "AllReplicasRan", fmt.Sprintf("%d replicas ran", n))
}

// anyReplicaLive reports whether a replica has not finished.
func anyReplicaLive(reps []schemas.ReplicaStatus) bool {
	for _, r := range reps {
		if !r.Phase.Terminal() {
			return true
		}
	}
	return false
}

// refreshReplicas records the replicas' final state after a stop.
func (w *jobWorkflow) refreshReplicas(ctx workflow.Context, ref backend.GangRef) {
	var result activities.WatchGangResult
	err := workflow.ExecuteActivity(withWatchActivity(ctx), ActivityWatchGang, activities.WatchGangInput{
		Ref: ref, Known: w.status.Replicas, MaxWait: time.Nanosecond,
	}).Get(ctx, &result)
	if err == nil {
		w.status.Replicas = result.Replicas
	}
}

// waitLogs waits, for a bounded time, until every log line has been forwarded.
func (w *jobWorkflow) waitLogs(ctx workflow.Context, logs workflow.Future) {
	timer := workflow.NewTimer(ctx, logDrainTimeout)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(logs, func(f workflow.Future) {
		var res activities.ForwardLogsResult
		if err := f.Get(ctx, &res); err != nil {
			w.logger.Warn("log forwarding failed", "error", err)
		} else if w.recovery && !w.logResult.Hung {
			w.logResult = res
			if len(res.Metrics) > 0 {
				w.status.Metrics = res.Metrics
			}
		}
	})
	sel.AddFuture(timer, func(workflow.Future) { w.logger.Warn("log forwarding did not finish in time") })
	sel.Select(ctx)
}

// finish records the last checkpoint, enters the terminal phase, cleans up and waits
// until every event is published and every update handled.
func (w *jobWorkflow) finish(ctx workflow.Context, ref backend.GangRef, phase schemas.JobPhase, reason, msg string) {
	if ck := w.in.Job.Spec.Checkpoint; ck != nil {
		var latest string
		err := workflow.ExecuteActivity(withShortActivity(ctx), ActivityLatestCheckpoint,
			activities.LatestCheckpointInput{URI: ck.URI}).Get(ctx, &latest)
		if err != nil {
			w.logger.Warn("could not list checkpoints", "error", err)
		}
		w.status.LastCheckpoint = latest
		if phase == schemas.JobSucceeded && ck.Keep > 0 &&
			workflow.GetVersion(ctx, changeCheckpointRetention, workflow.DefaultVersion, 1) == 1 {
			// Retention is housekeeping: a store that cannot be reached must not hold the
			// job's end up for long, nor fail it.
			pctx := workflow.WithRetryPolicy(withShortActivity(ctx), temporal.RetryPolicy{
				InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3,
			})
			err := workflow.ExecuteActivity(pctx, ActivityPruneCheckpoints,
				activities.PruneCheckpointsInput{URI: ck.URI, Keep: int(ck.Keep)}).Get(ctx, nil)
			if err != nil {
				w.logger.Warn("could not prune checkpoints", "keep", ck.Keep, "error", err)
			}
		}
	}
	now := workflow.Now(ctx)
	w.status.FinishTime = &now
	w.setCondition(ctx, schemas.ConditionCompleted, schemas.ConditionTrue, string(phase), msg)
	w.transition(ctx, phase, reason, msg)

	if err := workflow.ExecuteActivity(withShortActivity(ctx), ActivityCleanupGang, ref).Get(ctx, nil); err != nil {
		w.logger.Error("cleanup failed", "gang", ref.ID(), "error", err)
	}
	if w.quotaRequested {
		w.releaseQuota(ctx)
	}
	w.closing = true
	_ = workflow.Await(ctx, func() bool { return len(w.outbox) == 0 && !w.publishing })
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// admitToQuota asks the workspace's quota workflow to admit the job and waits, in
// Queued, until it does. It returns false with the job's terminal phase when the job is
// stopped while it waits, or when it alone asks for more than the quota.
func (w *jobWorkflow) admitToQuota(ctx workflow.Context) (schemas.JobPhase, string, string, bool) {
	job := &w.in.Job
	info := workflow.GetInfo(ctx)
	decisions := workflow.GetSignalChannel(ctx, SignalQuotaDecision)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
	var d QuotaDecision
	err := workflow.ExecuteLocalActivity(lctx, ActivityRequestQuota, activities.RequestQuotaInput{
		WorkflowID:   QuotaWorkflowID(job.Metadata.Workspace),
		WorkflowType: QuotaWorkflowName,
		TaskQueue:    info.TaskQueueName,
		UpdateName:   UpdateQuotaRequest,
		UpdateID:     w.uid + ":quota",
		Request: QuotaRequest{
			JobID: info.WorkflowExecution.ID, Priority: job.Spec.Resources.Priority, Resources: jobDemand(job),
		},
		InitialState: QuotaView{Workspace: job.Metadata.Workspace},
	}).Get(ctx, &d)
	if err != nil {
		return schemas.JobFailed, "QuotaUnavailable", "could not reach the workspace quota: " + rootMessage(err), false
	}
	w.quotaRequested = true
	for !d.Granted {
		if d.Rejected {
			return schemas.JobFailed, reasonQuotaExceeded, d.Message, false
		}
		if w.status.Phase != schemas.JobQueued || w.status.Message != d.Message {
			w.transition(ctx, schemas.JobQueued, reasonQuotaExceeded, d.Message)
		}
		stopped := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(decisions, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &d) })
		sel.AddReceive(w.stopCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); stopped = true })
		sel.Select(ctx)
		if stopped {
			return schemas.JobStopped, "StopRequested", w.stopReason, false
		}
	}
	w.setCondition(ctx, schemas.ConditionAdmitted, schemas.ConditionTrue, "QuotaGranted", "admitted by the workspace quota")
	return "", "", "", true
}

// releaseQuota gives the job's share of the workspace quota back (or leaves the queue).
// If the signal cannot be delivered, the quota workflow's sweep returns the share.
func (w *jobWorkflow) releaseQuota(ctx workflow.Context) {
	id := QuotaWorkflowID(w.in.Job.Metadata.Workspace)
	err := workflow.SignalExternalWorkflow(ctx, id, "", SignalQuotaRelease,
		QuotaRelease{JobID: workflow.GetInfo(ctx).WorkflowExecution.ID}).Get(ctx, nil)
	if err != nil {
		w.logger.Warn("could not release the workspace quota", "error", err)
	}
}

// stopRequested reports, without blocking, whether a stop is pending.
func (w *jobWorkflow) stopRequested(ctx workflow.Context) bool {
	return w.stopCh.ReceiveAsync(nil)
}

// transition moves the job to a phase: timeline, search attribute, status event.
func (w *jobWorkflow) transition(ctx workflow.Context, phase schemas.JobPhase, reason, msg string) {
	prev := w.status.Phase
	now := workflow.Now(ctx)
	w.status.Phase, w.status.Reason, w.status.Message = phase, reason, msg
	w.status.Timeline = append(w.status.Timeline, schemas.TimelineEntry{Time: now, Phase: phase, Reason: reason, Message: msg})
	if err := workflow.UpsertTypedSearchAttributes(ctx, PhaseKey.ValueSet(string(phase))); err != nil {
		w.logger.Warn("upsert phase search attribute failed", "error", err)
	}

	job := &w.in.Job
	w.eventSeq++
	id := fmt.Sprintf("%s:status:%d", w.uid, w.eventSeq)
	data := events.JobPhaseData{
		Job: job.Metadata.Name, UID: w.uid, Seq: w.eventSeq, Phase: string(phase), Reason: reason, Message: msg,
		Attempt: w.status.Attempt, Labels: job.Metadata.Labels, Framework: string(job.Spec.Framework),
	}
	if w.eventSeq > 1 {
		data.Previous = string(prev)
	}
	if phase == schemas.JobFailed {
		data.ExitCode = w.status.ExitCode
	}
	ev, err := events.New(id, events.TypeJobPhase, job.Metadata.Workspace,
		events.JobSource(job.Metadata.Workspace, job.Metadata.Name), job.Metadata.Name, now, data)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(ev); err == nil {
			w.outbox = append(w.outbox, events.Msg{
				Subject: events.JobStatusSubject(job.Metadata.Workspace, job.Metadata.Name), ID: id, Data: b,
			})
		}
	}
	if err != nil {
		w.logger.Error("could not encode status event", "error", err)
	}
}

func (w *jobWorkflow) setCondition(ctx workflow.Context, t schemas.ConditionType, s schemas.ConditionStatus, reason, msg string) {
	w.status.SetCondition(schemas.Condition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: workflow.Now(ctx)})
}

// publishLoop publishes the outbox in order, one batch at a time, until the workflow
// closes. Publishing never blocks the state machine: if NATS is down, events queue up
// and the local activity retries until it is back.
func (w *jobWorkflow) publishLoop(ctx workflow.Context) {
	lao := workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 7 * 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	}
	lctx := workflow.WithLocalActivityOptions(ctx, lao)
	for {
		_ = workflow.Await(ctx, func() bool { return len(w.outbox) > 0 || w.closing })
		if len(w.outbox) == 0 {
			return
		}
		batch := w.outbox
		w.outbox = nil
		w.publishing = true
		err := workflow.ExecuteLocalActivity(lctx, ActivityPublishEvents, activities.PublishEventsInput{Msgs: batch}).Get(ctx, nil)
		w.publishing = false
		if err != nil {
			w.logger.Error("status events not published", "count", len(batch), "error", err)
		}
	}
}

// PhaseKey and the other typed search attribute keys.
var (
	WorkspaceKey = temporal.NewSearchAttributeKeyKeyword(SearchAttrWorkspace)
	KindKey      = temporal.NewSearchAttributeKeyKeyword(SearchAttrKind)
	PhaseKey     = temporal.NewSearchAttributeKeyKeyword(SearchAttrPhase)
	NameKey      = temporal.NewSearchAttributeKeyKeyword(SearchAttrName)
	FrameworkKey = temporal.NewSearchAttributeKeyKeyword(SearchAttrFramework)
	LabelsKey    = temporal.NewSearchAttributeKeyKeywordList(SearchAttrLabels)
)

// LabelKeywords are a job's labels as sorted "key=value" keywords (the DlcLabels search
// attribute).
func LabelKeywords(labels map[string]string) []string {
	out := make([]string, 0, len(labels))
	for k, v := range labels {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// withShortActivity is for activities that finish in seconds to minutes (launch, stop,
// cleanup, checkpoint lookup); they heartbeat, so a dead worker is noticed quickly.
func withShortActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    heartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        10,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalidSpec},
		},
	})
}

func withWatchActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: watchMaxWait + time.Minute,
		HeartbeatTimeout:    heartbeatTimeout,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypeGangLost},
		},
	})
}

func withLongActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * 24 * time.Hour,
		HeartbeatTimeout:    heartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}

// rootMessage is the innermost error's message, without Temporal's wrapping.
func rootMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
