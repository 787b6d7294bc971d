package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// The TrainingJob workflow, read top-down:
//
// TrainingJobWorkflow → run: accept the job, read its workspace (workspace.go), wait
// for its share of the workspace quota if it runs in the quota pool, then attempts.
// A run that continues a previous one (continue_as_new.go) starts at resume instead,
// and goes on with the attempt that run handed over.
//
// attempts is the loop of attempts. Each turn plans the next attempt (recovery.go: pool,
// checkpoint to resume from, excluded nodes, health check), then runs it: an attempt
// (training_job_attempt.go) owns one launch of the gang, its log forwarder, its gang
// watch, its timers (spec.timeout, the placement timeout, the spot fallback's
// afterWaiting) and its elastic changes. It launches the gang (capacity.go waits in
// Queued while it does not fit) and follows it: each wait of the follow loop is one
// selector whose callbacks set one attemptEvent, and one switch acts on it. The
// attempt ends with an outcome; retry then says whether the job goes on (a failure a
// restart can cure, the spot fallback, the placement timeout; each releases the gang
// and waits its backoff first), and if it does, the one next-attempt step numbers the
// next attempt and continues as new when the history passed its bound.
//
// The job's phases: Pending → [Queued] → [HealthCheck] → Launching → Running →
// Succeeded | Failed | Stopped, with Restarting between attempts and Queued while a
// gang does not fit, is not placed in time or falls back to the public pool. Each
// transition is recorded in the status timeline and published once, in order, as an
// opendlc.job.phase.v1 event (transition, through the outbox). finish ends every path:
// the last checkpoint, the terminal phase, the gang's cleanup, the log archive and the
// quota's release.
//
// State lives in two types: jobWorkflow is what the job keeps from start to end (and
// carries across continue-as-new), attempt what one attempt keeps.

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
	// Parent is the uid of the experiment or pipeline run that started the job (a
	// trial, a step); its run record names it.
	Parent string `json:"parent,omitempty"`
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
	// logDrainTimeout is how long a finished job waits for its last log lines before it
	// asks whether its forwarder still sends; it waits on, a logDrainTimeout at a time,
	// while the forwarded log grows, at most logDrainMax in all (waitForwarder).
	logDrainTimeout = 2 * time.Minute
	// logDrainMax bounds the whole wait for a forwarder that keeps sending.
	logDrainMax = time.Hour
)

// Gang placement retries.
const (
	placementBackoff    = 5 * time.Second
	maxPlacementBackoff = 5 * time.Minute
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

// jobWorkflow is what the TrainingJob keeps from its start to its end, across its
// attempts (and, through JobContinuation, across continue-as-new).
type jobWorkflow struct {
	in     TrainingJobInput
	logger log.Logger
	uid    string
	status schemas.JobStatus

	// stopCh receives one value when a stop is requested (or the queue timer asks the
	// job to end, training_job_timeouts.go); stopReason is the stop's reason.
	stopCh     workflow.Channel
	stopReason string

	// events holds the status (and node-health) events not yet published; eventSeq
	// numbers the status events.
	events   *outbox
	eventSeq int

	// quotaRequested is set once the job has asked its workspace's quota workflow for
	// admission: it must give its share back when it ends.
	quotaRequested bool
	// quotaLedger is the quota workflow that admitted (or queues) the job: its
	// workspace's, or its cohort's; "" is the workspace's. quotaAsks counts the
	// admissions asked, each one request (training_job_quota.go).
	quotaLedger string
	quotaAsks   int
	// preemptCh receives the quota's preemption notices (QuotaPreemptNotice), and
	// preempted is the one being acted on.
	preemptCh workflow.ReceiveChannel
	preempted *QuotaPreemptNotice
	// priorityCh receives the priority set while the job is in the quota
	// (SignalJobPriority); priority is the last one, if any.
	priorityCh workflow.ReceiveChannel
	priority   *int32
	// podDefaults are the workspace's pod defaults, read when the job started.
	podDefaults *schemas.PodDefaults
	// clock adds up the time run and Queued, for spec.timeout and spec.queueTimeout.
	clock jobClock
	// spotWaitSince is when a spot job started waiting for spot capacity (preempted,
	// or launched and not yet placed) and has not run since (spot_fallback.go).
	spotWaitSince *time.Time
	// scale holds the scale update's requests (training_job_elastic.go).
	scale scaleRequests
	// rounds counts the gang watches this run completed, and attemptsRun the attempts
	// it started: a run continues as new only after progress (continue_as_new.go).
	rounds, attemptsRun int
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
	w.preemptCh = workflow.GetSignalChannel(ctx, SignalQuotaPreempt)
	w.priorityCh = workflow.GetSignalChannel(ctx, SignalJobPriority)
	return w.setupScale(ctx)
}

// run is a job's first run: accepted, its workspace read, admitted by the quota, then
// its attempts.
func (w *jobWorkflow) run(ctx workflow.Context) (TrainingJobResult, error) {
	job := &w.in.Job
	now := workflow.Now(ctx)
	w.status.StartTime = &now
	w.setCondition(ctx, schemas.ConditionAccepted, schemas.ConditionTrue, "Validated", "spec accepted")
	w.transition(ctx, jobOutcome{schemas.JobPending, ReasonAccepted, "job accepted"})

	ref := backend.GangRef{Workspace: job.Metadata.Workspace, Job: job.Metadata.Name, Attempt: 0}
	if out, ok := w.resolveWorkspace(ctx, &ref); !ok {
		return w.finish(ctx, ref, out)
	}
	if job.Spec.Resources.Pool == schemas.PoolQuota {
		if out, ok := w.admitToQuota(ctx); !ok {
			return w.finish(ctx, ref, out)
		}
	}
	return w.attempts(ctx, ref, placementBackoff, nil)
}

// attempts runs the job's attempts from ref.Attempt on until the job ends, or until
// the run continues as new. handedOver, when set, is the attempt a previous run of the
// workflow launched and handed over running: it is followed first.
func (w *jobWorkflow) attempts(ctx workflow.Context, ref backend.GangRef, backoff time.Duration,
	handedOver *attempt) (TrainingJobResult, error) {
	for {
		a := handedOver
		handedOver = nil
		var out jobOutcome
		if a != nil {
			out = a.follow(ctx, nil)
		} else {
			plan, end, ok := w.planAttempt(ctx, ref)
			if !ok {
				return w.finish(ctx, ref, end)
			}
			a = w.newAttempt(ctx, ref, plan)
			out = a.run(ctx)
		}
		if out.reason == reasonContinueAsNew {
			return TrainingJobResult{}, w.continueAsNew(ctx, ref, a, true, backoff)
		}
		ended := workflow.Now(ctx)
		w.currentAttempt().EndTime = &ended
		w.currentAttempt().Outcome = out.phase
		again, final := w.retry(ctx, a, out, &backoff)
		if !again {
			return w.finish(ctx, ref, final)
		}
		// The next attempt.
		ref.Attempt++
		if w.boundReached(ctx) {
			return TrainingJobResult{}, w.continueAsNew(ctx, ref, a, false, backoff)
		}
	}
}

// retry decides whether the job goes on after attempt a ended with out: after a
// failure a restart can cure (recover, recovery.go), after waiting too long for spot
// capacity (fallBackToPublic, spot_fallback.go), or after the placement timeout
// (retryPlacement, placement.go). Each releases the attempt's gang and waits what it
// waits before the next attempt. It returns false with the job's outcome when the job
// ends instead.
func (w *jobWorkflow) retry(ctx workflow.Context, a *attempt, out jobOutcome, backoff *time.Duration) (bool, jobOutcome) {
	switch {
	case out.phase == schemas.JobFailed && a.failed != nil:
		if again, final := w.recover(ctx, a, out); !again {
			return false, final
		}
		w.cleanup(ctx, a.ref)
		return true, jobOutcome{}
	case out.reason == ReasonSpotFallback:
		w.fallBackToPublic(ctx, a.ref, out)
		return true, jobOutcome{}
	case out.reason == ReasonPlacementTimeout:
		return w.retryPlacement(ctx, a.ref, out, backoff)
	case out.reason == ReasonQuotaPreempted:
		return w.requeue(ctx, a)
	}
	return false, out
}

// stopped is the outcome of a stop request, or of the queue timeout
// (training_job_timeouts.go), which ends a Queued job the same way.
func (w *jobWorkflow) stopped() jobOutcome {
	if out := w.clock.queueTimeout; out != nil {
		return *out // the queue timer asked the job to end
	}
	return jobOutcome{schemas.JobStopped, ReasonStopRequested, w.stopReason}
}

// stopRequested reports, without blocking, whether a stop is pending.
func (w *jobWorkflow) stopRequested() bool {
	return w.stopCh.ReceiveAsync(nil)
}

// waitUnlessStopped waits d (a timer) or until the job is asked to stop, whichever
// comes first, and reports whether it was asked to stop. The timer is left to fire.
// spot, when not nil, is an attempt's spotFallback.afterWaiting timer: it ends the
// wait too.
func (w *jobWorkflow) waitUnlessStopped(ctx workflow.Context, d time.Duration, spot workflow.Future) bool {
	stopped := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(ctx, d), func(workflow.Future) {})
	sel.AddReceive(w.stopCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); stopped = true })
	if spot != nil {
		sel.AddFuture(spot, func(workflow.Future) {})
	}
	sel.Select(ctx)
	return stopped
}

// cleanup removes a gang's replicas and whatever else the backend created for it.
func (w *jobWorkflow) cleanup(ctx workflow.Context, ref backend.GangRef) {
	if err := cleanupGang(ctx, ref); err != nil {
		w.logger.Error("cleanup failed", "gang", ref.ID(), "error", err)
	}
}

// finish records the last checkpoint, enters the terminal phase, cleans up and waits
// until every event is published and every update handled.
func (w *jobWorkflow) finish(ctx workflow.Context, ref backend.GangRef, out jobOutcome) (TrainingJobResult, error) {
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

	w.cleanup(ctx, ref)
	w.archiveLogs(ctx)
	if w.quotaRequested {
		w.releaseQuota(ctx)
	}
	w.recordJob(ctx)
	w.events.drain(ctx)
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return TrainingJobResult{Status: w.status}, nil
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
