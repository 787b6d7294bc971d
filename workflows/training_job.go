package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
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
	// Continued is the state a previous run of this job carried over when it continued
	// as new (continue_as_new.go); nil on the job's first run.
	Continued *JobContinuation `json:"continued,omitempty"`
	// HistoryBound overrides the history bound of continue_as_new.go; nil for the
	// defaults. Tests lower it to make a short job continue as new.
	HistoryBound *HistoryBound `json:"historyBound,omitempty"`
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

// Timeouts used by the TrainingJob workflow's activities.
const (
	// watchMaxWait bounds one WatchGang call, so history grows by one activity per
	// watchMaxWait at most while nothing changes.
	watchMaxWait = 10 * time.Minute
	// logDrainTimeout bounds how long a finished job waits for its last log lines.
	logDrainTimeout = 2 * time.Minute
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
	if in.Continued != nil {
		return w.resume(ctx, *in.Continued)
	}
	return w.run(ctx)
}

// jobOutcome is how a job, or one of its attempts, ends.
type jobOutcome = outcome[schemas.JobPhase]

// jobWorkflow is the TrainingJob state machine's state.
type jobWorkflow struct {
	in     TrainingJobInput
	logger log.Logger
	uid    string
	status schemas.JobStatus

	// stopCh receives one value when a stop is requested.
	stopCh     workflow.Channel
	stopReason string

	// events holds the status (and node-health) events not yet published; eventSeq
	// numbers the status events.
	events   *outbox
	eventSeq int

	// quotaRequested is set once the job has asked its workspace's quota workflow for
	// admission: it must give its share back when it ends.
	quotaRequested bool

	// failed holds what the current attempt's failure was, and logResult what its log
	// forwarder saw.
	failed    *failure
	logResult activities.ForwardLogsResult
	// spotWaitSince is when a spot job was last preempted and has not run since.
	spotWaitSince *time.Time
	// spotTimer is the running attempt's spotFallback.afterWaiting timer, nil when
	// none runs (spot_fallback.go).
	spotTimer workflow.Future
	// placementTimeout is the current attempt's placement timeout (zero: none).
	placementTimeout time.Duration
	// podDefaults are the workspace's pod defaults, read when the job started.
	podDefaults *schemas.PodDefaults
	// clock adds up the time run and Queued, for spec.timeout and spec.queueTimeout.
	clock jobClock
	// rounds counts the gang watches this run completed, and attemptsRun the attempts
	// it started (continue_as_new.go).
	rounds, attemptsRun int
	// elastic is the state of an elastic job's scaling and replacements
	// (training_job_elastic.go).
	elastic elasticState
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
	if err := setStopHandler(ctx, func() bool { return w.status.Phase.Terminal() }, &w.stopReason, w.stopCh,
		func() StopResult { return StopResult{Phase: w.status.Phase} }); err != nil {
		return err
	}
	w.events = newOutbox(ctx, "status events")
	return w.setupElastic(ctx)
}

func (w *jobWorkflow) run(ctx workflow.Context) (TrainingJobResult, error) {
	job := &w.in.Job
	now := workflow.Now(ctx)
	w.status.StartTime = &now
	w.setCondition(ctx, schemas.ConditionAccepted, schemas.ConditionTrue, "Validated", "spec accepted")
	w.transition(ctx, jobOutcome{schemas.JobPending, "Accepted", "job accepted"})

	ref := backend.GangRef{Workspace: job.Metadata.Workspace, Job: job.Metadata.Name, Attempt: 0}
	if out, ok := w.resolveWorkspace(ctx, &ref); !ok {
		w.finish(ctx, ref, out)
		return TrainingJobResult{Status: w.status}, nil
	}
	if job.Spec.Resources.Pool == schemas.PoolQuota {
		if out, ok := w.admitToQuota(ctx); !ok {
			w.finish(ctx, ref, out)
			return TrainingJobResult{Status: w.status}, nil
		}
	}
	return w.attempts(ctx, ref, placementBackoff, nil)
}

// attempts runs the job's attempts from ref.Attempt on until the job ends, or until
// it continues as new. resumed, when set, is the attempt a previous run of the
// workflow launched and handed over still running.
func (w *jobWorkflow) attempts(ctx workflow.Context, ref backend.GangRef, backoff time.Duration,
	resumed *attemptPlan) (TrainingJobResult, error) {
	var out jobOutcome
	for {
		var plan attemptPlan
		if resumed != nil {
			plan, resumed = *resumed, nil
			w.elastic.plan = plan
			out = w.followAttempt(ctx, ref, w.status.Replicas, nil)
		} else {
			var (
				end jobOutcome
				ok  bool
			)
			plan, end, ok = w.planAttempt(ctx, ref)
			if !ok {
				out = end
				break
			}
			w.status.Attempts = append(w.status.Attempts, schemas.AttemptRecord{
				Attempt: ref.Attempt, Pool: plan.pool, StartTime: workflow.Now(ctx), ResumedFrom: plan.resumeFrom,
			})
			w.failed, w.logResult = nil, activities.ForwardLogsResult{}
			w.attemptsRun++
			out = w.runAttempt(ctx, ref, plan)
		}
		if out.reason == reasonContinueAsNew {
			return TrainingJobResult{}, w.continueAsNew(ctx, ref, &plan, backoff)
		}
		ended := workflow.Now(ctx)
		w.currentAttempt().EndTime = &ended
		w.currentAttempt().Outcome = out.phase
		if out.phase == schemas.JobFailed && w.failed != nil {
			again, final := w.recover(ctx, ref, *w.failed, out)
			if !again {
				out = final
				break
			}
			if err := cleanupGang(ctx, ref); err != nil {
				w.logger.Error("cleanup failed", "gang", ref.ID(), "error", err)
			}
			ref.Attempt++
			if w.boundReached(ctx) {
				return TrainingJobResult{}, w.continueAsNew(ctx, ref, nil, backoff)
			}
			continue
		}
		if out.reason == reasonSpotFallback {
			w.fallBackToPublic(ctx, ref, out)
			ref.Attempt++
			if w.boundReached(ctx) {
				return TrainingJobResult{}, w.continueAsNew(ctx, ref, nil, backoff)
			}
			continue
		}
		if out.reason != reasonPlacementTimeout {
			break
		}
		w.currentAttempt().Outcome = schemas.JobQueued
		// Not every replica could be placed in time: release them all, wait, try again
		// with a new attempt.
		if err := cleanupGang(ctx, ref); err != nil {
			w.logger.Error("cleanup failed", "gang", ref.ID(), "error", err)
		}
		w.setCondition(ctx, schemas.ConditionLaunched, schemas.ConditionFalse, reasonPlacementTimeout, out.message)
		w.transition(ctx, jobOutcome{schemas.JobQueued, reasonPlacementTimeout, fmt.Sprintf("%s; retrying in %s", out.message, backoff)})
		if w.waitUnlessStopped(ctx, backoff) {
			out = w.stopped()
			break
		}
		backoff = min(2*backoff, maxPlacementBackoff)
		ref.Attempt++
		if w.boundReached(ctx) {
			return TrainingJobResult{}, w.continueAsNew(ctx, ref, nil, backoff)
		}
	}

	w.finish(ctx, ref, out)
	return TrainingJobResult{Status: w.status}, nil
}

// stopped is the outcome of a stop request, or of the queue timeout
// (training_job_timeouts.go), which ends a Queued job the same way.
func (w *jobWorkflow) stopped() jobOutcome {
	if out := w.clock.queueTimeout; out != nil {
		return *out // the queue timer asked the job to end
	}
	return jobOutcome{schemas.JobStopped, "StopRequested", w.stopReason}
}

// runAttempt launches one attempt and follows it to its end. It returns the job's
// terminal outcome, or the placement timeout (reason reasonPlacementTimeout, no phase).
func (w *jobWorkflow) runAttempt(ctx workflow.Context, ref backend.GangRef, plan attemptPlan) jobOutcome {
	if w.stopRequested(ctx) {
		return w.stopped()
	}
	cancelSpotTimer := w.startSpotTimer(ctx, plan)
	defer cancelSpotTimer()
	w.status.Attempt = ref.Attempt
	w.startElastic(plan)
	gangJob := w.gangJob()
	w.transition(ctx, jobOutcome{schemas.JobLaunching, "Launching", fmt.Sprintf("creating %d replicas", gangJob.Spec.TotalReplicas())})

	launched, stopped, err := w.launchWhenItFits(ctx, activities.LaunchGangInput{
		Job: gangJob,
		Params: backend.GangParams{
			Ref: ref, UID: w.uid, Params: w.in.Params,
			ResumeFrom: plan.resumeFrom, ExcludeNodes: plan.exclude, Pool: plan.pool,
			PodDefaults: w.podDefaults,
		},
	})
	if stopped {
		if w.spotWaitOver() {
			return w.spotFallbackOutcome()
		}
		return w.stopped()
	}
	if err != nil {
		w.failed = &failure{class: schemas.FailureLaunch, message: rootMessage(err), at: workflow.Now(ctx)}
		return jobOutcome{schemas.JobFailed, "LaunchFailed", rootMessage(err)}
	}
	w.status.Replicas = launched.Replicas
	w.launchedElastic()
	w.setCondition(ctx, schemas.ConditionLaunched, schemas.ConditionTrue, "ReplicasCreated",
		fmt.Sprintf("%d replicas created", len(launched.Replicas)))
	return w.followAttempt(ctx, ref, launched.Replicas, &launched)
}

// followAttempt follows a launched attempt to its end: it starts the log forwarder and
// the timers, and watches the gang. launched is nil for an attempt a previous run of
// the workflow launched and handed over (continue_as_new.go): it was placed already.
func (w *jobWorkflow) followAttempt(ctx workflow.Context, ref backend.GangRef,
	reps []schemas.ReplicaStatus, launched *activities.LaunchGangResult) jobOutcome {
	job := &w.in.Job
	var logs *future[activities.ForwardLogsResult]
	var cancelLogs workflow.CancelFunc = func() {}
	if job.Spec.Logs.ForwardLogs() {
		f := forwardLogs(w.logsContext(ctx, &cancelLogs), activities.ForwardLogsInput{
			Ref: ref, UID: w.uid, Replicas: reps,
			HangTimeout: job.Spec.FaultTolerance.HangTimeout.D(), LogPatterns: logPatterns(job),
		})
		logs = &f
	}

	var timeout workflow.Future
	if d := job.Spec.Timeout.D(); d > 0 {
		left := w.runTimeLeft(ctx, d)
		timeout = workflow.NewTimer(ctx, max(left, time.Millisecond))
	}

	var placement workflow.Future
	if launched != nil {
		w.placementTimeout = attemptPlacementTimeout(launched.PlacementTimeout, job)
	}
	if pt := w.placementTimeout; pt > 0 && launched != nil {
		pctx, cancelPlacement := workflow.WithCancel(ctx)
		defer cancelPlacement()
		placement = workflow.NewTimer(pctx, pt)
	}

	var hang *future[activities.ForwardLogsResult]
	if job.Spec.FaultTolerance.HangTimeout.D() > 0 {
		hang = logs
	}
	out := w.follow(ctx, ref, timeout, placement, hang)
	if out.reason == reasonContinueAsNew {
		w.handOverLogs(ctx, logs, cancelLogs)
		return out
	}
	if out.phase != schemas.JobSucceeded || anyReplicaLive(w.status.Replicas) {
		// Stop whatever still runs: the remaining replicas of a failed gang, or all of
		// them on stop or timeout.
		if err := stopGang(ctx, ref); err != nil {
			w.logger.Error("stop gang failed", "gang", ref.ID(), "error", err)
		}
		w.refreshReplicas(ctx, ref)
	}
	if logs != nil {
		w.waitLogs(ctx, *logs)
	}
	w.waitElasticLogs(ctx)
	return out
}

// follow watches the gang until it ends, a stop is requested or the timeout fires, or
// the placement timeout fires before every replica is placed on a node (reason
// reasonPlacementTimeout, no phase), or the log forwarder (hang) reports a hang.
func (w *jobWorkflow) follow(ctx workflow.Context, ref backend.GangRef, timeout, placement workflow.Future,
	hang *future[activities.ForwardLogsResult]) jobOutcome {
	for {
		if out, done := w.evaluate(ctx); done {
			return out
		}
		if placement != nil && w.status.Phase == schemas.JobLaunching && w.placedOnNodes(ctx) {
			placement = nil // every replica is on a node: containers may still be starting
		}
		if w.spotTimer != nil && w.status.Phase == schemas.JobLaunching && w.placedOnNodes(ctx) {
			w.spotPlaced() // on spot nodes: the wait for spot capacity is over
		}
		if w.status.Phase != schemas.JobLaunching {
			placement = nil // placed: the placement timeout no longer applies
			w.spotPlaced()
			if w.spotWaitSince != nil {
				w.spotWaitSince = nil // spot capacity ran the job again
			}
			if rec := w.currentAttempt(); rec.RunningTime == nil {
				now := workflow.Now(ctx)
				rec.RunningTime = &now
			}
		}
		if w.status.Phase == schemas.JobRunning && w.boundReached(ctx) {
			return jobOutcome{reason: reasonContinueAsNew} // placed: no placement timer to hand over
		}
		watchCtx, cancelWatch := workflow.WithCancel(ctx)
		watch := watchGang(watchCtx, activities.WatchGangInput{
			Ref: ref, Known: knownReplicas(w.status.Replicas), MaxWait: watchMaxWait,
		})
		var (
			result    activities.WatchGangResult
			watchErr  error
			watched   bool
			stopped   bool
			timedOut  bool
			notPlaced bool
			hung      bool
			spotOver  bool
			scale     bool
		)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(watch.Future, func(workflow.Future) { result, watchErr = watch.get(ctx); watched = true })
		sel.AddReceive(w.stopCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); stopped = true })
		if timeout != nil {
			sel.AddFuture(timeout, func(workflow.Future) { timedOut = true })
		}
		if placement != nil {
			sel.AddFuture(placement, func(workflow.Future) { notPlaced = true })
		}
		if w.spotTimer != nil {
			sel.AddFuture(w.spotTimer, func(workflow.Future) { spotOver = true })
		}
		sel.AddReceive(w.elastic.scaleCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); scale = true })
		if hang != nil {
			h := *hang
			sel.AddFuture(h.Future, func(workflow.Future) {
				if res, err := h.get(ctx); err == nil && res.Hung {
					w.logResult, hung = res, true
				}
				hang = nil // done either way: its outcome is read once
			})
		}
		sel.Select(ctx)
		if !watched && !stopped && !timedOut && !notPlaced && !hung && !spotOver && !scale && keepsWatch(ctx) {
			// Only the log forwarder ended, without a hang: the watch goes on. (Before
			// this change the watch was cancelled and its empty result taken for the
			// replicas, so a watch that answers with what it was told waited for ever.)
			sel.Select(ctx)
		}
		if stopped || timedOut || notPlaced || hung || spotOver {
			// Wait for the watch to acknowledge the cancellation, so it is not still
			// observing the gang while it is stopped and cleaned up.
			cancelWatch()
			_ = watch.Get(ctx, nil)
			if stopped {
				return w.stopped()
			}
			if hung {
				msg := fmt.Sprintf("no replica wrote a line for %s (hangTimeout %s)", w.logResult.Quiet, w.in.Job.Spec.FaultTolerance.HangTimeout.D())
				w.failed = &failure{class: schemas.FailureHang, message: msg, at: workflow.Now(ctx)}
				return jobOutcome{schemas.JobFailed, "Hang", msg}
			}
			if notPlaced {
				return jobOutcome{"", reasonPlacementTimeout, w.notPlacedMessage(w.placementTimeout)}
			}
			if spotOver {
				return w.spotFallbackOutcome()
			}
			return jobOutcome{schemas.JobFailed, "Timeout", fmt.Sprintf("the job ran longer than its timeout %s", w.in.Job.Spec.Timeout.D())}
		}
		if scale {
			// Scale between two watches: the watch is restarted with the new gang.
			cancelWatch()
			_ = watch.Get(ctx, nil)
			w.applyScale(ctx, ref)
			continue
		}
		cancelWatch()
		if watchErr != nil {
			return jobOutcome{schemas.JobFailed, "WatchFailed", rootMessage(watchErr)}
		}
		w.status.Replicas = result.Replicas
		w.rounds++
		w.replaceLost(ctx, ref)
	}
}

// evaluate applies the framework's success rule (frameworks.Outcome) to the replicas:
// for example TensorFlow's chief, MPI's launcher or Ray's head decides, while PyTorch
// needs every replica to succeed. It returns true with the job's outcome once the rule
// decides; until then it moves the job to Running once every replica has started.
func (w *jobWorkflow) evaluate(ctx workflow.Context) (jobOutcome, bool) {
	reps := w.status.Replicas
	if len(reps) == 0 {
		return jobOutcome{}, false
	}
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
				class := r.Reason
				if class == "" {
					class = schemas.FailureUnclassified
				}
				w.failed = &failure{replica: &r, class: class, message: msg, at: workflow.Now(ctx)}
				return jobOutcome{schemas.JobFailed, reason, msg}, true
			}
		}
		return jobOutcome{schemas.JobFailed, "ReplicaFailed", fmt.Sprintf("replica %s failed", by)}, true
	case schemas.JobSucceeded:
		if w.status.Phase == schemas.JobLaunching {
			// Replicas that finished between two observations did run: record Running so
			// that every successful job's timeline reads the same.
			w.markRan(ctx, succeeded)
		}
		if succeeded == len(reps) {
			return jobOutcome{schemas.JobSucceeded, "AllReplicasSucceeded", fmt.Sprintf("%d replicas succeeded", succeeded)}, true
		}
		return jobOutcome{schemas.JobSucceeded, "LeaderSucceeded",
			fmt.Sprintf("replica %s succeeded, which decides a %s job; the other replicas are stopped", by, fw)}, true
	}
	placed := running+succeeded == len(reps)
	if !placed && w.status.Phase == schemas.JobLaunching && running > 0 && !anyReplicaPending(reps) {
		// Every replica has started and the rule tolerates the ones that ended (a Ray
		// worker, a TF ps that failed while the chief runs): the job runs, and a
		// placement timeout no longer applies.
		placed = true
	}
	if placed && w.status.Phase == schemas.JobLaunching {
		w.setCondition(ctx, schemas.ConditionRunning, schemas.ConditionTrue, "AllReplicasRunning",
			fmt.Sprintf("%d replicas running", running))
		w.transition(ctx, jobOutcome{schemas.JobRunning, "AllReplicasRunning", fmt.Sprintf("%d replicas running", running)})
	}
	return jobOutcome{}, false
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
	w.transition(ctx, jobOutcome{schemas.JobRunning, "AllReplicasRan", fmt.Sprintf("%d replicas ran", n)})
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
	result, err := watchGang(ctx, activities.WatchGangInput{
		Ref: ref, Known: knownReplicas(w.status.Replicas), MaxWait: time.Nanosecond,
	}).get(ctx)
	if err == nil {
		w.status.Replicas = result.Replicas
	}
}

// waitLogs waits, for a bounded time, until every log line has been forwarded.
func (w *jobWorkflow) waitLogs(ctx workflow.Context, logs future[activities.ForwardLogsResult]) {
	timer := workflow.NewTimer(ctx, logDrainTimeout)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(logs.Future, func(workflow.Future) {
		res, err := logs.get(ctx)
		if err != nil {
			w.logger.Warn("log forwarding failed", "error", err)
		} else if !w.logResult.Hung {
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
func (w *jobWorkflow) finish(ctx workflow.Context, ref backend.GangRef, out jobOutcome) {
	if ck := w.in.Job.Spec.Checkpoint; ck != nil {
		latest, err := latestCheckpoint(ctx, activities.LatestCheckpointInput{URI: ck.URI, Workspace: w.in.Job.Metadata.Workspace})
		if err != nil {
			w.logger.Warn("could not list checkpoints", "error", err)
		}
		w.status.LastCheckpoint = latest
		if out.phase == schemas.JobSucceeded && ck.Keep > 0 {
			if _, err := pruneCheckpoints(ctx, activities.PruneCheckpointsInput{URI: ck.URI, Keep: int(ck.Keep), Workspace: w.in.Job.Metadata.Workspace}); err != nil {
				w.logger.Warn("could not prune checkpoints", "keep", ck.Keep, "error", err)
			}
		}
	}
	now := workflow.Now(ctx)
	w.status.FinishTime = &now
	w.setCondition(ctx, schemas.ConditionCompleted, schemas.ConditionTrue, string(out.phase), out.message)
	w.transition(ctx, out)

	if err := cleanupGang(ctx, ref); err != nil {
		w.logger.Error("cleanup failed", "gang", ref.ID(), "error", err)
	}
	w.archiveLogs(ctx)
	if w.quotaRequested {
		w.releaseQuota(ctx)
	}
	w.events.drain(ctx)
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// admitToQuota asks the workspace's quota workflow to admit the job and waits, in
// Queued, until it does. It returns false with the job's terminal outcome when the job
// is stopped while it waits, or when it alone asks for more than the quota.
func (w *jobWorkflow) admitToQuota(ctx workflow.Context) (jobOutcome, bool) {
	job := &w.in.Job
	info := workflow.GetInfo(ctx)
	asked := workflow.Now(ctx)
	decisions := workflow.GetSignalChannel(ctx, SignalQuotaDecision)
	quota := QuotaStart(job.Metadata.Workspace)
	d, err := requestQuota(ctx, activities.RequestQuotaInput{
		WorkflowID:   quota.ID,
		WorkflowType: quota.WorkflowType,
		TaskQueue:    info.TaskQueueName,
		UpdateName:   UpdateQuotaRequest,
		UpdateID:     w.uid + ":quota",
		Request: QuotaRequest{
			JobID: info.WorkflowExecution.ID, Priority: job.Spec.Resources.Priority, Resources: jobDemand(job),
		},
		InitialState: quota.Input,
	})
	if err != nil {
		return jobOutcome{schemas.JobFailed, "QuotaUnavailable", "could not reach the workspace quota: " + rootMessage(err)}, false
	}
	w.quotaRequested = true
	for !d.Granted {
		if d.Rejected {
			return jobOutcome{schemas.JobFailed, reasonQuotaExceeded, d.Message}, false
		}
		if w.status.Phase != schemas.JobQueued || w.status.Message != d.Message {
			w.transition(ctx, jobOutcome{schemas.JobQueued, reasonQuotaExceeded, d.Message})
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
	w.setCondition(ctx, schemas.ConditionAdmitted, schemas.ConditionTrue, "QuotaGranted", "admitted by the workspace quota")
	w.recordAdmissionWait(ctx, asked)
	return jobOutcome{}, true
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
func (w *jobWorkflow) stopRequested(_ workflow.Context) bool {
	return w.stopCh.ReceiveAsync(nil)
}

// transition moves the job to a phase: timeline, search attribute, status event.
func (w *jobWorkflow) transition(ctx workflow.Context, to jobOutcome) {
	phase, reason, msg := to.phase, to.reason, to.message
	prev := w.status.Phase
	now := workflow.Now(ctx)
	w.status.Phase, w.status.Reason, w.status.Message = phase, reason, msg
	w.clockTransition(ctx, prev, phase, now)
	w.status.Timeline = append(w.status.Timeline, schemas.TimelineEntry{Time: now, Phase: phase, Reason: reason, Message: msg})
	if err := workflow.UpsertTypedSearchAttributes(ctx, PhaseKey.ValueSet(string(phase))); err != nil {
		w.logger.Warn("upsert phase search attribute failed", "error", err)
	}
	w.recordPhaseMetrics(ctx, phase, now)

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
		err = w.events.addEvent(events.JobStatusSubject(job.Metadata.Workspace, job.Metadata.Name), ev)
	}
	if err != nil {
		w.logger.Error("could not encode status event", "error", err)
	}
}

func (w *jobWorkflow) setCondition(ctx workflow.Context, t schemas.ConditionType, s schemas.ConditionStatus, reason, msg string) {
	w.status.SetCondition(schemas.Condition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: workflow.Now(ctx)})
}
