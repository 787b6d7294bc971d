package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Recovery (AIMaster): a failed attempt is classified and, when the failure is one a
// restart can cure, the whole gang is restarted on a new attempt, from the newest
// complete checkpoint, off the nodes that failed it, with a backoff; preemptions are
// counted apart from failures. Everything it decides lives in the workflow (restarts,
// excluded nodes, the attempt history), so no worker or server restart resets it.

// Recovery actions (AttemptRecord.Action).
const (
	actionRetry      = "Retry"
	actionPreemption = "Preemption"
	actionFail       = "Fail"
)

// Recovery parameters.
const (
	defaultMaxPreempt = 100
	restartBackoff    = time.Second
	maxRestartBackoff = time.Minute
)

// failure is what the workflow knows about a failed attempt.
type failure struct {
	// replica is the replica that failed the attempt; nil for a hang or a launch
	// failure.
	replica *schemas.ReplicaStatus
	class   schemas.FailureClass
	message string
	at      time.Time
}

// classify decides what a failure means: the job's own rules first (exit codes, log
// patterns), then the built-in ones. It returns the failure class and the action.
func classify(job *schemas.TrainingJob, f failure, matches []activities.LogMatch) (schemas.FailureClass, string, string) {
	class := f.class
	matched := map[int]bool{}
	for _, m := range matches {
		matched[m.Pattern] = true
	}
	// Patterns are passed to the log forwarder in rule order, skipping rules without
	// one: map rule index to pattern index.
	pattern := 0
	for i, r := range job.Spec.FaultTolerance.Rules {
		codeOK, logOK := len(r.ExitCodes) == 0, r.LogPattern == ""
		if r.LogPattern != "" {
			logOK = matched[pattern]
			pattern++
		}
		if len(r.ExitCodes) > 0 && f.replica != nil && f.replica.ExitCode != nil {
			codeOK = slices.Contains(r.ExitCodes, *f.replica.ExitCode)
		}
		if codeOK && logOK && (len(r.ExitCodes) == 0 || f.replica != nil) {
			act := actionRetry
			if r.Action == schemas.ActionFail {
				act = actionFail
			}
			return class, act, fmt.Sprintf("rule %d of spec.faultTolerance.rules", i)
		}
	}
	switch class {
	case schemas.FailurePreempted, schemas.FailureEvicted:
		return class, actionPreemption, "built-in: preemptions and evictions are recovered"
	case schemas.FailureNodeLost:
		if job.Spec.Resources.Pool == schemas.PoolSpot {
			return class, actionPreemption, "built-in: a lost spot node is a reclaim"
		}
		return class, actionRetry, "built-in: node failures are retried elsewhere"
	case schemas.FailureImagePull, schemas.FailureConfig, schemas.FailureOOMKilled, schemas.FailureLaunch:
		return class, actionFail, "built-in: a restart cannot cure it"
	}
	return class, actionRetry, "built-in: failures are retried within maxRestarts"
}

// excludesNode says whether a failure of this class keeps later attempts off the
// failed replica's node.
func excludesNode(c schemas.FailureClass) bool {
	switch c {
	case schemas.FailureNodeLost, schemas.FailureSignal, schemas.FailureEvicted, schemas.FailureUnclassified:
		return true
	}
	return false
}

// attemptPlan is what a new attempt starts with.
type attemptPlan struct {
	pool       schemas.Pool
	resumeFrom string
	exclude    []string
}

// planAttempt decides where the next attempt runs and what it resumes from: the
// newest complete checkpoint for a restarted attempt, the spot fallback to public, the
// excluded nodes, and the pre-flight health check's verdict. It returns false with the
// job's terminal outcome when the job must end (stopped, or no healthy node left).
func (w *jobWorkflow) planAttempt(ctx workflow.Context, ref backend.GangRef) (attemptPlan, jobOutcome, bool) {
	job := &w.in.Job
	plan := attemptPlan{pool: w.pool(ctx)}
	if ref.Attempt > 0 && job.Spec.Checkpoint != nil {
		// A store that cannot be read must not hold the recovery up for long: after a
		// few tries the attempt starts from spec.checkpoint.resumeFrom.
		latest, err := latestCheckpointToResume(ctx, activities.LatestCheckpointInput{URI: job.Spec.Checkpoint.URI, Workspace: job.Metadata.Workspace})
		if err != nil {
			w.logger.Warn("could not list checkpoints; the attempt starts fresh", "error", err)
		}
		plan.resumeFrom = latest
		if latest == "" {
			plan.resumeFrom = job.Spec.Checkpoint.ResumeFrom
		}
	}
	if job.Spec.HealthCheck.Enabled {
		w.transition(ctx, jobOutcome{schemas.JobHealthCheck, ReasonHealthCheck, fmt.Sprintf("checking the candidate nodes of attempt %d", ref.Attempt)})
		res, err := checkNodes(ctx, backend.CheckNodesInput{
			Ref: ref, Job: *job, Pool: plan.pool, Exclude: w.status.ExcludedNodes,
		})
		if err != nil {
			w.logger.Warn("health check failed to run; launching without it", "error", err)
		} else {
			w.recordHealth(ctx, res)
			if len(res.Nodes) > 0 && len(res.Unhealthy()) == len(res.Nodes) {
				return plan, jobOutcome{schemas.JobFailed, ReasonNoHealthyNodes,
					"no healthy node: " + healthSummary(res.Nodes)}, false
			}
		}
	}
	plan.exclude = slices.Clone(w.status.ExcludedNodes)
	if w.stopRequested() {
		return plan, w.stopped(), false
	}
	return plan, jobOutcome{}, true
}

// recordHealth keeps the health check's verdict in status and excludes the unhealthy
// nodes.
func (w *jobWorkflow) recordHealth(ctx workflow.Context, res backend.CheckNodesResult) {
	w.status.Health = w.status.Health[:0]
	for _, n := range res.Nodes {
		w.status.Health = append(w.status.Health, schemas.NodeHealth{
			Node: n.Node, Healthy: n.Healthy, Reason: n.Reason, Message: n.Message, CheckedAt: n.CheckedAt,
		})
	}
	for _, n := range res.Unhealthy() {
		w.exclude(n)
	}
	// One node-health event per node this check quarantined (the id is the same if a
	// retried check reports it again).
	for _, n := range res.Nodes {
		if !slices.Contains(res.Quarantined, n.Node) {
			continue
		}
		if m, err := NodeHealthEvent(n, w.in.Job.Metadata.Name); err == nil {
			w.events.add(m)
		} else {
			w.logger.Warn("could not encode a node-health event", "node", n.Node, "error", err)
		}
	}
	msg := fmt.Sprintf("%d of %d nodes healthy", len(res.Nodes)-len(res.Unhealthy()), len(res.Nodes))
	if len(res.Quarantined) > 0 {
		msg += "; quarantined " + strings.Join(res.Quarantined, ", ")
	}
	w.setCondition(ctx, schemas.ConditionHealthChecked, schemas.ConditionTrue, "Checked", msg)
}

func healthSummary(nodes []backend.NodeHealth) string {
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		parts = append(parts, n.Node+" "+n.Reason)
	}
	return strings.Join(parts, ", ")
}

// exclude adds a node to the excluded nodes, once.
func (w *jobWorkflow) exclude(node string) {
	if node == "" || slices.Contains(w.status.ExcludedNodes, node) {
		return
	}
	w.status.ExcludedNodes = append(w.status.ExcludedNodes, node)
	sort.Strings(w.status.ExcludedNodes)
}

// pool is the pool the next attempt runs in: a spot job falls back to public after
// the configured number of preemptions, or once it has waited the configured time for
// spot capacity (spot_fallback.go: the afterWaiting timer of an attempt; this checks
// the wait again as an attempt is planned).
func (w *jobWorkflow) pool(ctx workflow.Context) schemas.Pool {
	spec := &w.in.Job.Spec
	p := spec.Resources.Pool
	sf := spec.Resources.SpotFallback
	switch {
	case p != schemas.PoolSpot || sf == nil:
		return p
	case w.fellBack():
		return schemas.PoolPublic // it waited too long for spot capacity (spot_fallback.go)
	case sf.AfterPreemptions > 0 && w.status.Preemptions >= int(sf.AfterPreemptions):
		w.notePreemptionFallback(ctx)
		return schemas.PoolPublic
	case sf.AfterWaiting > 0 && w.spotWaitSince != nil && workflow.Now(ctx).Sub(*w.spotWaitSince) >= sf.AfterWaiting.D():
		return schemas.PoolPublic
	}
	return p
}

// recover decides whether failed attempt a (that ended with out) is restarted. It
// returns true when a new attempt should start (after the backoff it waited), or false
// with the job's terminal outcome.
func (w *jobWorkflow) recover(ctx workflow.Context, a *attempt, out jobOutcome) (bool, jobOutcome) {
	job, f, ref := &w.in.Job, *a.failed, a.ref
	msg := out.message
	failedWith := func(msg string) jobOutcome { return jobOutcome{out.phase, out.reason, msg} }
	class, action, why := classify(job, f, a.logResult.Matches)
	rec := w.currentAttempt()
	rec.Class, rec.Action, rec.Message = class, action, msg
	if f.replica != nil {
		rec.Replica, rec.Node = f.replica.Name, f.replica.Node
	}
	at := f.at
	rec.FaultTime = &at
	released := workflow.Now(ctx)
	rec.ReleasedTime = &released

	ft := job.Spec.FaultTolerance
	maxPreempt := int(ft.MaxPreemptions)
	if maxPreempt == 0 {
		maxPreempt = defaultMaxPreempt
	}
	switch {
	case action == actionFail && ft.MaxRestarts == 0:
		rec.Outcome = schemas.JobFailed
		return false, out
	case action == actionFail:
		rec.Outcome = schemas.JobFailed
		return false, failedWith(fmt.Sprintf("%s (%s: not retried, %s)", msg, class, why))
	case action == actionPreemption && w.status.Preemptions >= maxPreempt:
		rec.Outcome = schemas.JobFailed
		return false, failedWith(fmt.Sprintf("%s (%s: %d preemptions, the limit)", msg, class, maxPreempt))
	case action == actionRetry && w.status.Restarts >= int(ft.MaxRestarts):
		rec.Outcome = schemas.JobFailed
		if ft.MaxRestarts == 0 {
			return false, out
		}
		return false, failedWith(fmt.Sprintf("%s (%s: %d restarts used, maxRestarts %d)", msg, class, w.status.Restarts, ft.MaxRestarts))
	}
	rec.Outcome = schemas.JobRestarting
	backoff := restartBackoff
	if action == actionPreemption {
		w.status.Preemptions++
		if w.spotWaitSince == nil {
			w.spotWaitSince = &released
		}
	} else {
		w.status.Restarts++
		for i := 1; i < w.status.Restarts && backoff < maxRestartBackoff; i++ {
			backoff *= 2
		}
		backoff = min(backoff, maxRestartBackoff)
	}
	if ft.ExcludesFailedNodes() && f.replica != nil && excludesNode(class) {
		w.exclude(f.replica.Node)
	}
	w.setCondition(ctx, schemas.ConditionCompleted, schemas.ConditionFalse, string(class), msg)
	w.transition(ctx, jobOutcome{schemas.JobRestarting, ReasonRestarting, fmt.Sprintf("attempt %d %s: %s; %s %d in %s%s",
		ref.Attempt, strings.ToLower(string(class)), msg, strings.ToLower(action), w.actionCount(action), backoff, w.excludedNote())})
	if w.waitUnlessStopped(ctx, backoff, nil) {
		return false, w.stopped()
	}
	return true, jobOutcome{}
}

func (w *jobWorkflow) actionCount(action string) int {
	if action == actionPreemption {
		return w.status.Preemptions
	}
	return w.status.Restarts
}

func (w *jobWorkflow) excludedNote() string {
	if len(w.status.ExcludedNodes) == 0 {
		return ""
	}
	return "; excluding " + strings.Join(w.status.ExcludedNodes, ", ")
}

// currentAttempt is the record of the attempt in progress.
func (w *jobWorkflow) currentAttempt() *schemas.AttemptRecord {
	if len(w.status.Attempts) == 0 {
		w.status.Attempts = append(w.status.Attempts, schemas.AttemptRecord{})
	}
	return &w.status.Attempts[len(w.status.Attempts)-1]
}

// logPatterns are the failure rules' log patterns in rule order.
// withCollectors adds the job's metric collectors (spec.metrics) to the input of the
// attempt's log forwarder: the stdout collectors' regular expressions, and the file
// collectors with the working directory and the attempt's start. A job without
// collectors leaves the input as it was, so the forwarders of jobs started before
// collectors existed are scheduled with the same input. The files are read by the
// attempt's forwarder only (files false: one of replicas added later).
func (w *jobWorkflow) withCollectors(in *activities.ForwardLogsInput, files bool) {
	m := w.in.Job.Spec.Metrics
	if m == nil {
		return
	}
	for _, c := range m.Collectors {
		switch {
		case c.Stdout != nil:
			in.MetricRegexes = append(in.MetricRegexes, c.Stdout.Patterns()...)
		case c.File != nil && files:
			in.MetricFiles = append(in.MetricFiles, *c.File)
		}
	}
	if len(in.MetricFiles) > 0 {
		in.WorkingDir = w.in.Job.Spec.WorkingDir
		if n := len(w.status.Attempts); n > 0 {
			in.Since = w.status.Attempts[n-1].StartTime
		}
	}
}

func logPatterns(job *schemas.TrainingJob) []string {
	var out []string
	for _, r := range job.Spec.FaultTolerance.Rules {
		if r.LogPattern != "" {
			out = append(out, r.LogPattern)
		}
	}
	return out
}
