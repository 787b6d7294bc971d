package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
)

// One attempt of a TrainingJob: one launch of its gang, followed to its end. run
// launches the gang and follow follows it; follow's loop waits, in one selector, for
// whatever can happen next (attemptEvent) and acts on it in one switch. The attempt
// ends with the job's outcome or with one of the outcomes without a phase that the
// job's attempts loop retries on: the placement timeout, the spot fallback, or the
// hand-over to the next run (continue-as-new).

// attempt is what one attempt keeps: its gang, its log forwarders, its timers and its
// failure. The job's status (phase, replicas, counters) stays on jobWorkflow, which
// every attempt updates.
type attempt struct {
	w *jobWorkflow
	// ref names the attempt's gang; plan is where it runs and what it resumes from.
	ref  backend.GangRef
	plan attemptPlan

	// failed is what failed the attempt (nil while nothing did), and logResult what
	// its log forwarder saw (hang, rule matches, metrics).
	failed    *failure
	logResult activities.ForwardLogsResult

	// logs is the attempt's log forwarder (nil when logs are not forwarded), and
	// cancelLogs cancels it. hang is logs while it may still report a hang (nil
	// without spec.faultTolerance.hangTimeout, or once it has ended).
	logs       *future[activities.ForwardLogsResult]
	cancelLogs workflow.CancelFunc
	hang       *future[activities.ForwardLogsResult]
	// extraLogs are the forwarders of replicas added or replaced while it runs
	// (training_job_elastic.go).
	extraLogs []future[activities.ForwardLogsResult]

	// timeout fires when spec.timeout is used up (nil without one).
	timeout workflow.Future
	// placementTimeout is the attempt's placement timeout (zero: none), and placement
	// its timer, nil once every replica is placed.
	placementTimeout time.Duration
	placement        workflow.Future
	// spotTimer is the spotFallback.afterWaiting timer of an attempt in the spot pool,
	// nil when none runs or once the attempt is placed (spot_fallback.go).
	spotTimer workflow.Future
}

// attemptEvent is what ended one wait of an attempt's follow loop: each selector
// callback sets one, and one switch acts on it.
type attemptEvent int

const (
	// eventWatched: the gang watch answered (changed replicas, an error, or its
	// maximum wait).
	eventWatched attemptEvent = iota + 1
	// eventLogsEnded: the log forwarder ended without reporting a hang; the watch
	// goes on.
	eventLogsEnded
	// eventStop: a stop was requested.
	eventStop
	// eventTimeout: spec.timeout is used up.
	eventTimeout
	// eventNotPlaced: the placement timeout fired before every replica was placed.
	eventNotPlaced
	// eventHang: the log forwarder reports that no replica wrote a line for
	// spec.faultTolerance.hangTimeout.
	eventHang
	// eventSpotWaitOver: the spotFallback.afterWaiting timer fired before the attempt
	// was placed.
	eventSpotWaitOver
	// eventScale: the scale update asks for another replica count.
	eventScale
	// eventPreempted: the quota preempted the job (training_job_quota.go).
	eventPreempted
)

// newAttempt records a new attempt, numbered ref.Attempt, in the job's attempt history.
func (w *jobWorkflow) newAttempt(ctx workflow.Context, ref backend.GangRef, plan attemptPlan) *attempt {
	w.status.Attempts = append(w.status.Attempts, schemas.AttemptRecord{
		Attempt: ref.Attempt, Pool: plan.pool, StartTime: workflow.Now(ctx), ResumedFrom: plan.resumeFrom,
	})
	w.attemptsRun++
	return &attempt{w: w, ref: ref, plan: plan}
}

// run launches the attempt and follows it to its end. It returns the job's terminal
// outcome, or an outcome without a phase that the attempts loop retries on.
func (a *attempt) run(ctx workflow.Context) jobOutcome {
	w := a.w
	if w.stopRequested() {
		return w.stopped()
	}
	cancelSpotTimer := a.startSpotTimer(ctx)
	defer cancelSpotTimer()
	w.status.Attempt = a.ref.Attempt
	w.startElastic()
	gangJob := w.gangJob()
	w.transition(ctx, jobOutcome{schemas.JobLaunching, ReasonLaunching, fmt.Sprintf("creating %d replicas", gangJob.Spec.TotalReplicas())})

	launched, stopped, err := a.launchWhenItFits(ctx, activities.LaunchGangInput{
		Job: gangJob,
		Params: backend.GangParams{
			Ref: a.ref, UID: w.uid, Params: w.in.Params,
			ResumeFrom: a.plan.resumeFrom, ExcludeNodes: a.plan.exclude, Pool: a.plan.pool,
			PodDefaults: w.podDefaults,
		},
	})
	if stopped {
		if a.spotWaitOver() {
			return w.spotFallbackOutcome()
		}
		return w.stopped()
	}
	if err != nil {
		a.failed = &failure{class: schemas.FailureLaunch, message: rootMessage(err), at: workflow.Now(ctx)}
		return jobOutcome{schemas.JobFailed, ReasonLaunchFailed, rootMessage(err)}
	}
	w.status.Replicas = launched.Replicas
	w.launchedElastic()
	w.setCondition(ctx, schemas.ConditionLaunched, schemas.ConditionTrue, "ReplicasCreated",
		fmt.Sprintf("%d replicas created", len(launched.Replicas)))
	return a.follow(ctx, &launched)
}

// follow follows a launched attempt to its end: it starts the log forwarder and the
// timers, and watches the gang (watch); then it stops what still runs and waits for
// the last log lines. launched is nil for an attempt a previous run of the workflow
// launched and handed over (continue_as_new.go): it was placed already.
func (a *attempt) follow(ctx workflow.Context, launched *activities.LaunchGangResult) jobOutcome {
	w := a.w
	job := &w.in.Job
	a.cancelLogs = func() {}
	if job.Spec.Logs.ForwardLogs() {
		lctx, cancel := workflow.WithCancel(ctx)
		a.cancelLogs = cancel
		in := activities.ForwardLogsInput{
			Ref: a.ref, UID: w.uid, Replicas: w.status.Replicas,
			HangTimeout: job.Spec.FaultTolerance.HangTimeout.D(), LogPatterns: logPatterns(job),
		}
		w.withCollectors(&in, true)
		f := forwardLogs(lctx, in)
		a.logs = &f
	}

	if d := job.Spec.Timeout.D(); d > 0 {
		left := w.runTimeLeft(ctx, d)
		a.timeout = workflow.NewTimer(ctx, max(left, time.Millisecond))
	}

	if launched != nil {
		// The placement timeout the launch recorded: the job's, else its pool's, else
		// the backend default (activities.LaunchGangResult).
		a.placementTimeout = launched.PlacementTimeout
		if a.placementTimeout > 0 {
			pctx, cancelPlacement := workflow.WithCancel(ctx)
			defer cancelPlacement()
			a.placement = workflow.NewTimer(pctx, a.placementTimeout)
		}
	}

	if job.Spec.FaultTolerance.HangTimeout.D() > 0 {
		a.hang = a.logs
	}
	out := a.watch(ctx)
	if out.reason == reasonContinueAsNew {
		a.handOverLogs(ctx)
		return out
	}
	if out.phase != schemas.JobSucceeded || anyReplicaLive(w.status.Replicas) {
		// Stop whatever still runs: the remaining replicas of a failed gang, or all of
		// them on stop or timeout.
		if err := stopGang(ctx, a.ref); err != nil {
			w.logger.Error("stop gang failed", "gang", a.ref.ID(), "error", err)
		}
		a.refreshReplicas(ctx)
	}
	if a.logs != nil {
		a.waitLogs(ctx)
	}
	a.waitExtraLogs(ctx)
	return out
}

// watch is the follow loop: it watches the gang until the framework's rule decides the
// job's outcome, a stop is requested, a timer fires, or the log forwarder reports a
// hang; a placed (Running) attempt whose run passed its history bound is handed over
// to the next run (reason reasonContinueAsNew).
func (a *attempt) watch(ctx workflow.Context) jobOutcome {
	w := a.w
	for {
		if out, done := a.evaluate(ctx); done {
			return out
		}
		a.notePlaced(ctx)
		if w.takePreemption() {
			return a.ended(ctx, eventPreempted) // a notice that came before the watch
		}
		if w.status.Phase == schemas.JobRunning && w.boundReached(ctx) {
			return jobOutcome{reason: reasonContinueAsNew} // placed: no placement timer to hand over
		}
		watchCtx, cancelWatch := workflow.WithCancel(ctx)
		pending := watchGang(watchCtx, activities.WatchGangInput{
			Ref: a.ref, Known: knownReplicas(w.status.Replicas), MaxWait: watchMaxWait,
		})
		ev, result, watchErr := a.next(ctx, pending)
		switch ev {
		case eventStop, eventTimeout, eventNotPlaced, eventHang, eventSpotWaitOver, eventPreempted:
			// Wait for the watch to acknowledge the cancellation, so it is not still
			// observing the gang while it is stopped and cleaned up.
			cancelWatch()
			_ = pending.Get(ctx, nil)
			return a.ended(ctx, ev)
		case eventScale:
			// Scale between two watches: the watch is restarted with the new gang.
			cancelWatch()
			_ = pending.Get(ctx, nil)
			a.applyScale(ctx)
		case eventWatched:
			cancelWatch()
			if watchErr != nil {
				return jobOutcome{schemas.JobFailed, ReasonWatchFailed, rootMessage(watchErr)}
			}
			w.status.Replicas = result.Replicas
			w.rounds++
			a.replaceLost(ctx)
		}
	}
}

// next waits for what happens next to the attempt: the watch's answer, a stop, one of
// its timers, a scale, or the log forwarder's end. A forwarder that ends without a hang
// changes nothing, and the wait goes on.
func (a *attempt) next(ctx workflow.Context, pending future[activities.WatchGangResult]) (
	ev attemptEvent, result activities.WatchGangResult, watchErr error) {
	w := a.w
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(pending.Future, func(workflow.Future) { result, watchErr = pending.get(ctx); ev = eventWatched })
	sel.AddReceive(w.stopCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); ev = eventStop })
	if a.timeout != nil {
		sel.AddFuture(a.timeout, func(workflow.Future) { ev = eventTimeout })
	}
	if a.placement != nil {
		sel.AddFuture(a.placement, func(workflow.Future) { ev = eventNotPlaced })
	}
	if a.spotTimer != nil {
		sel.AddFuture(a.spotTimer, func(workflow.Future) { ev = eventSpotWaitOver })
	}
	sel.AddReceive(w.scale.ch, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); ev = eventScale })
	sel.AddReceive(w.preemptCh, func(c workflow.ReceiveChannel, _ bool) {
		var n QuotaPreemptNotice
		c.Receive(ctx, &n)
		w.preempted, ev = &n, eventPreempted
	})
	if a.hang != nil {
		h := *a.hang
		sel.AddFuture(h.Future, func(workflow.Future) {
			ev = eventLogsEnded
			if res, err := h.get(ctx); err == nil && res.Hung {
				a.logResult, ev = res, eventHang
			}
			a.hang = nil // done either way: its outcome is read once
		})
	}
	sel.Select(ctx)
	if ev == eventLogsEnded {
		sel.Select(ctx) // only the log forwarder ended: the watch goes on
	}
	return ev, result, watchErr
}

// ended is the attempt's outcome when a stop, a timer or a hang ended it (ev).
func (a *attempt) ended(ctx workflow.Context, ev attemptEvent) jobOutcome {
	w := a.w
	switch ev {
	case eventStop:
		return w.stopped()
	case eventHang:
		msg := fmt.Sprintf("no replica wrote a line for %s (hangTimeout %s)", a.logResult.Quiet, w.in.Job.Spec.FaultTolerance.HangTimeout.D())
		a.failed = &failure{class: schemas.FailureHang, message: msg, at: workflow.Now(ctx)}
		return jobOutcome{schemas.JobFailed, ReasonHang, msg}
	case eventNotPlaced:
		return jobOutcome{"", ReasonPlacementTimeout, notPlacedMessage(w.status.Replicas, a.placementTimeout)}
	case eventSpotWaitOver:
		return w.spotFallbackOutcome()
	case eventPreempted:
		return w.preemptedOutcome()
	}
	return jobOutcome{schemas.JobFailed, ReasonTimeout, fmt.Sprintf("the job ran longer than its timeout %s", w.in.Job.Spec.Timeout.D())}
}

// notePlaced records how far the attempt is placed before each watch: once every
// replica is on a node, the placement timeout and the spot fallback's wait no longer
// apply (containers may still be starting); once the job left Launching, the attempt
// runs.
func (a *attempt) notePlaced(ctx workflow.Context) {
	w := a.w
	if w.status.Phase == schemas.JobLaunching {
		if allPlaced(w.status.Replicas) {
			a.placement = nil
			a.spotPlaced() // on spot nodes: the wait for spot capacity is over
		}
		return
	}
	a.placement = nil // placed: the placement timeout no longer applies
	a.spotPlaced()
	w.spotWaitSince = nil // spot capacity ran the job again
	if rec := w.currentAttempt(); rec.RunningTime == nil {
		now := workflow.Now(ctx)
		rec.RunningTime = &now
	}
}

// evaluate applies the framework's success rule (frameworks.Outcome) to the replicas:
// for example TensorFlow's chief, MPI's launcher or Ray's head decides, while PyTorch
// needs every replica to succeed. It returns true with the job's outcome once the rule
// decides; until then it moves the job to Running once every replica has started.
func (a *attempt) evaluate(ctx workflow.Context) (jobOutcome, bool) {
	w := a.w
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
				a.failed = &failure{replica: &r, class: class, message: msg, at: workflow.Now(ctx)}
				return jobOutcome{schemas.JobFailed, reason, msg}, true
			}
		}
		return jobOutcome{schemas.JobFailed, ReasonReplicaFailed, fmt.Sprintf("replica %s failed", by)}, true
	case schemas.JobSucceeded:
		if w.status.Phase == schemas.JobLaunching {
			// Replicas that finished between two observations did run: record Running so
			// that every successful job's timeline reads the same.
			w.markRan(ctx, succeeded)
		}
		if succeeded == len(reps) {
			return jobOutcome{schemas.JobSucceeded, ReasonAllReplicasSucceeded, fmt.Sprintf("%d replicas succeeded", succeeded)}, true
		}
		return jobOutcome{schemas.JobSucceeded, ReasonLeaderSucceeded,
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
		w.setCondition(ctx, schemas.ConditionRunning, schemas.ConditionTrue, ReasonAllReplicasRunning,
			fmt.Sprintf("%d replicas running", running))
		w.transition(ctx, jobOutcome{schemas.JobRunning, ReasonAllReplicasRunning, fmt.Sprintf("%d replicas running", running)})
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
		return ReasonReplicaStopped, fmt.Sprintf("replica %s was stopped outside the job", r.Name)
	}
	w.status.ExitCode = r.ExitCode
	msg = fmt.Sprintf("replica %s failed", r.Name)
	if r.ExitCode != nil {
		msg += fmt.Sprintf(" with exit code %d", *r.ExitCode)
	}
	if r.Message != "" {
		msg += ": " + r.Message
	}
	return ReasonReplicaFailed, msg
}

// markRan records Running for replicas first seen already finished: they did run, and
// every successful job's timeline then reads the same.
func (w *jobWorkflow) markRan(ctx workflow.Context, n int) {
	w.setCondition(ctx, schemas.ConditionRunning, schemas.ConditionTrue, ReasonAllReplicasRan,
		fmt.Sprintf("%d replicas ran to completion between two observations", n))
	w.transition(ctx, jobOutcome{schemas.JobRunning, ReasonAllReplicasRan, fmt.Sprintf("%d replicas ran", n)})
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
func (a *attempt) refreshReplicas(ctx workflow.Context) {
	w := a.w
	result, err := watchGang(ctx, activities.WatchGangInput{
		Ref: a.ref, Known: knownReplicas(w.status.Replicas), MaxWait: time.Nanosecond,
	}).get(ctx)
	if err == nil {
		w.status.Replicas = result.Replicas
	}
}

// waitLogs waits until the attempt's forwarder has forwarded every log line, and keeps
// what it saw; waitForwarder says how long.
func (a *attempt) waitLogs(ctx workflow.Context) {
	w, logs := a.w, *a.logs
	a.waitForwarder(ctx, logs.Future, func() {
		res, err := logs.get(ctx)
		if err != nil {
			w.logger.Warn("log forwarding failed", "error", err)
		} else if !a.logResult.Hung {
			a.logResult = res
			if len(res.Metrics) > 0 {
				w.status.Metrics = res.Metrics
			}
			if res.Resources != nil {
				w.status.Resources = res.Resources
			}
		}
	})
}

// waitForwarder waits for a log forwarder of the finished attempt (f) to end, and then
// runs done. A forwarder ends once it has sent every replica's last line, but one whose
// worker died is taken over by another worker only after its heartbeat timeout (a
// minute by default), and the new one then sends the rest from where the log stream
// stops, which may take minutes more for a talkative job. So the wait does not end at a
// fixed time: each logDrainTimeout it reads how far the forwarded log has come
// (LogProgress), and it gives up, leaving the rest of the lines unforwarded, only once
// a whole logDrainTimeout passed without a line, or after logDrainMax in all.
//
// Histories from before the change (changeLogDrainProgress) gave up at the first
// logDrainTimeout.
func (a *attempt) waitForwarder(ctx workflow.Context, f workflow.Future, done func()) {
	w := a.w
	start := workflow.Now(ctx)
	var last int64 = -1 // the first period is always followed by one more
	for {
		finished := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(f, func(workflow.Future) {
			finished = true
			done()
		})
		sel.AddFuture(workflow.NewTimer(ctx, logDrainTimeout), func(workflow.Future) {})
		sel.Select(ctx)
		if finished {
			return
		}
		if workflow.GetVersion(ctx, changeLogDrainProgress, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			w.logger.Warn("log forwarding did not finish in time")
			return
		}
		progress, err := logProgress(ctx, activities.LogProgressInput{Ref: a.ref, UID: w.uid, Replicas: w.status.Replicas})
		switch {
		case err != nil:
			w.logger.Warn("log forwarding did not finish in time, and how far it came cannot be read", "error", err)
			return
		case progress == last:
			w.logger.Warn("log forwarding did not finish: no line forwarded for a while", "quiet", logDrainTimeout, "lines", progress)
			return
		case workflow.Now(ctx).Sub(start) >= logDrainMax:
			w.logger.Warn("log forwarding did not finish in time", "waited", logDrainMax, "lines", progress)
			return
		}
		last = progress
	}
}
