package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Bounded history of the TrainingJob workflow. A job that runs for weeks, or restarts
// many times, would grow its history toward Temporal's limits (51,200 events, 50 MB),
// where the server terminates the workflow. Before that, the job continues as new: the
// run ends and a new run of the same workflow id starts with JobContinuation, the state
// the job needs (status with its timeline and attempt history, the event sequence, the
// clock of its timeouts, the plan of the running attempt). The running gang is not
// touched: the new run follows the same attempt. See docs/architecture.md, "Bounded
// histories".
//
// A run continues as new when its history passes jobMaxHistoryEvents events or
// jobMaxHistoryBytes bytes, or when Temporal suggests it, at one of two points where
// nothing is half done: before a gang watch of a placed (Running) attempt, or between
// two attempts. It never does while a stop is pending or an update handler runs, and a
// run always makes progress first (one watch, or one attempt), so a low bound cannot
// make runs follow each other without end.

// History bounds of one TrainingJob run.
const (
	// jobMaxHistoryEvents bounds the events of one run, a fifth of Temporal's limit.
	jobMaxHistoryEvents = 10000 / 2
	// jobMaxHistoryBytes bounds the bytes of one run.
	jobMaxHistoryBytes = 4 << 20
	// reasonContinueAsNew is the outcome (no phase) of an attempt handed over to the
	// next run.
	reasonContinueAsNew = "ContinueAsNew"
)

// HistoryBound overrides a workflow's history bound; a zero field keeps the default.
// It is a test knob: the API never sets it.
type HistoryBound struct {
	// MaxEvents bounds the events of one run.
	MaxEvents int `json:"maxEvents,omitempty"`
	// MaxBytes bounds the bytes of one run.
	MaxBytes int `json:"maxBytes,omitempty"`
}

// JobContinuation is what a TrainingJob run carries over to the next when it
// continues as new.
type JobContinuation struct {
	// UID is the job's uid (the first run's id), which names its events and logs.
	UID string `json:"uid"`
	// Runs counts the runs before this one.
	Runs int `json:"runs"`
	// Status is the job's status: phase, timeline, conditions, attempt history,
	// replicas, restarts and preemptions, excluded nodes.
	Status schemas.JobStatus `json:"status"`
	// EventSeq is the sequence number of the last status event.
	EventSeq int `json:"eventSeq"`
	// Ref is the gang of the current attempt (or of the next, between attempts).
	Ref backend.GangRef `json:"ref"`
	// Following is set when Ref's attempt runs: the new run follows it.
	Following bool `json:"following,omitempty"`
	// Plan is the running attempt's plan.
	Plan AttemptPlanState `json:"plan"`
	// Backoff is the next placement retry's backoff.
	Backoff time.Duration `json:"backoff"`
	// PlacementTimeout is the running attempt's placement timeout.
	PlacementTimeout time.Duration `json:"placementTimeout,omitempty"`
	// QuotaRequested is set when the job holds (or waits for) a share of its
	// workspace's quota, which it gives back when it ends.
	QuotaRequested bool `json:"quotaRequested,omitempty"`
	// QuotaLedger is the quota workflow that admitted the job ("" the workspace's),
	// and QuotaAsks how many admissions it asked.
	QuotaLedger string `json:"quotaLedger,omitempty"`
	QuotaAsks   int    `json:"quotaAsks,omitempty"`
	// QuotaPriority is the priority last set with `dlc job priority`, if any.
	QuotaPriority *int32               `json:"quotaPriority,omitempty"`
	SpotWaitSince *time.Time           `json:"spotWaitSince,omitempty"`
	PodDefaults   *schemas.PodDefaults `json:"podDefaults,omitempty"`
	// Clock is the time run and Queued so far (training_job_timeouts.go).
	Clock ClockState `json:"clock"`
}

// AttemptPlanState is an attemptPlan carried across continue-as-new.
type AttemptPlanState struct {
	Pool       schemas.Pool `json:"pool,omitempty"`
	ResumeFrom string       `json:"resumeFrom,omitempty"`
	Exclude    []string     `json:"exclude,omitempty"`
}

// ClockState is a jobClock carried across continue-as-new.
type ClockState struct {
	RunSince    *time.Time    `json:"runSince,omitempty"`
	Ran         time.Duration `json:"ran,omitempty"`
	QueuedSince *time.Time    `json:"queuedSince,omitempty"`
	Queued      time.Duration `json:"queued,omitempty"`
}

// boundReached reports whether the run should continue as new now: it has made
// progress, its history passed its bound (or Temporal suggests it), no stop is pending
// and no update handler runs.
func (w *jobWorkflow) boundReached(ctx workflow.Context) bool {
	if w.rounds == 0 && w.attemptsRun == 0 {
		return false
	}
	info := workflow.GetInfo(ctx)
	maxEvents, maxBytes := jobMaxHistoryEvents, jobMaxHistoryBytes
	if b := w.in.HistoryBound; b != nil {
		if b.MaxEvents > 0 {
			maxEvents = b.MaxEvents
		}
		if b.MaxBytes > 0 {
			maxBytes = b.MaxBytes
		}
	}
	if !info.GetContinueAsNewSuggested() && info.GetCurrentHistoryLength() < maxEvents &&
		info.GetCurrentHistorySize() < maxBytes {
		return false
	}
	return w.stopCh.Len() == 0 && w.stopReason == "" && workflow.AllHandlersFinished(ctx)
}

// continueAsNew publishes the events still queued and returns the error that ends this
// run and starts the next with the job's state. a is the run's last attempt: following,
// it runs and the next run follows it (ref is a's gang); otherwise it has ended and the
// next run starts attempt ref.
func (w *jobWorkflow) continueAsNew(ctx workflow.Context, ref backend.GangRef, a *attempt, following bool, backoff time.Duration) error {
	// Quota decisions that arrived meanwhile are stale (the job was admitted): take
	// them in so that none is left unread.
	decisions := workflow.GetSignalChannel(ctx, SignalQuotaDecision)
	for decisions.ReceiveAsync(nil) {
	}
	w.events.drain(ctx)
	c := JobContinuation{
		UID: w.uid, Status: w.status, EventSeq: w.eventSeq, Ref: ref, Backoff: backoff,
		PlacementTimeout: a.placementTimeout, QuotaRequested: w.quotaRequested,
		QuotaLedger: w.quotaLedger, QuotaAsks: w.quotaAsks, QuotaPriority: w.keptPriority(),
		SpotWaitSince: w.spotWaitSince, PodDefaults: w.podDefaults,
		Clock: ClockState{RunSince: w.clock.runSince, Ran: w.clock.ran, QueuedSince: w.clock.queuedSince, Queued: w.clock.queued},
	}
	if w.in.Continued != nil {
		c.Runs = w.in.Continued.Runs
	}
	c.Runs++
	if following {
		c.Following = true
		c.Plan = AttemptPlanState{Pool: a.plan.pool, ResumeFrom: a.plan.resumeFrom, Exclude: a.plan.exclude}
	}
	w.logger.Info("continuing as new", "runs", c.Runs, "events", workflow.GetInfo(ctx).GetCurrentHistoryLength(),
		"bytes", workflow.GetInfo(ctx).GetCurrentHistorySize(), "following", c.Following)
	next := w.in
	next.Continued = &c
	return workflow.NewContinueAsNewError(ctx, TrainingJobWorkflowName, next)
}

// resume is the start of a run that continues a previous one: it restores the state
// carried over and goes on where that run stopped.
func (w *jobWorkflow) resume(ctx workflow.Context, c JobContinuation) (TrainingJobResult, error) {
	w.uid, w.status, w.eventSeq = c.UID, c.Status, c.EventSeq
	w.quotaRequested, w.spotWaitSince, w.podDefaults = c.QuotaRequested, c.SpotWaitSince, c.PodDefaults
	w.quotaLedger, w.quotaAsks, w.priority = c.QuotaLedger, c.QuotaAsks, c.QuotaPriority
	w.clock = jobClock{runSince: c.Clock.RunSince, ran: c.Clock.Ran, queuedSince: c.Clock.QueuedSince, queued: c.Clock.Queued}
	if w.status.Phase == schemas.JobQueued && w.clock.queuedSince != nil {
		// The queue timer of the previous run went with it: start it again for what is
		// left of spec.queueTimeout.
		if d := w.in.Job.Spec.QueueTimeout.D(); d > 0 {
			left := d - w.clock.queued - workflow.Now(ctx).Sub(*w.clock.queuedSince)
			w.startQueueTimer(ctx, max(left, time.Millisecond))
		}
	}
	var handedOver *attempt
	if c.Following {
		handedOver = &attempt{w: w, ref: c.Ref, placementTimeout: c.PlacementTimeout,
			plan: attemptPlan{pool: c.Plan.Pool, resumeFrom: c.Plan.ResumeFrom, exclude: c.Plan.Exclude}}
	}
	return w.attempts(ctx, c.Ref, c.Backoff, handedOver)
}

// handOverLogs stops the attempt's log forwarder before the run continues as new and
// waits until it has stopped (its activity waits for the cancellation to be
// acknowledged, withForwarderActivity), so the next run's forwarder, which resumes
// after the last line it published, never forwards alongside it.
func (a *attempt) handOverLogs(ctx workflow.Context) {
	if a.logs == nil {
		return
	}
	a.cancelLogs()
	_ = a.logs.Get(ctx, nil)
}

// knownReplicas is what a gang watch is told about the replicas: only the fields it
// compares (name, phase, exit code, node) and the role and index, so a round of a
// large gang adds as little as it can to the history.
func knownReplicas(reps []schemas.ReplicaStatus) []schemas.ReplicaStatus {
	out := make([]schemas.ReplicaStatus, len(reps))
	for i, r := range reps {
		out[i] = schemas.ReplicaStatus{Name: r.Name, Role: r.Role, Index: r.Index, Phase: r.Phase, ExitCode: r.ExitCode, Node: r.Node}
	}
	return out
}

// withForwarderActivity is for ForwardLogs: a long activity whose cancellation the
// workflow waits for (it cancels it only to continue as new).
func withForwarderActivity(ctx workflow.Context) workflow.Context {
	opts := workflow.GetActivityOptions(withLongActivity(ctx))
	opts.WaitForCancellation = true
	return workflow.WithActivityOptions(ctx, opts)
}
