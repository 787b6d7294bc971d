package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
)

// One typed function per activity the workflows call: each names the activity by its
// wire name (names.go; workers/register.go registers the activities under the same
// names, and recorded histories name them) and applies the activity's options, which
// all live in this file.

// heartbeatTimeout bounds how long a dead worker holds a long activity.
const heartbeatTimeout = 10 * time.Second

// pacedHeartbeatTimeout is the heartbeat timeout of the activities that last as long
// as a job and pace their heartbeats to a per-worker budget (WatchGang, ForwardLogs;
// activities/heartbeat_pacer.go): a dead worker holds them up to a minute, after which
// they are retried on another; the job's pods run on meanwhile. A worker may set
// another (SetLongHeartbeatTimeout, paced_heartbeat.go).
const pacedHeartbeatTimeout = time.Minute

// future is a pending activity's result of type T. A selector takes the
// workflow.Future it holds (f.Future), not f.
type future[T any] struct{ workflow.Future }

// get waits for the result.
func (f future[T]) get(ctx workflow.Context) (T, error) {
	var v T
	err := f.Get(ctx, &v)
	return v, err
}

// doneFuture is a pending activity that returns nothing but an error. A selector takes
// the workflow.Future it holds.
type doneFuture struct{ workflow.Future }

// wait waits for the activity to end.
func (f doneFuture) wait(ctx workflow.Context) error {
	return f.Get(ctx, nil)
}

// call runs an activity and waits for its result.
func call[T any](ctx workflow.Context, name string, in any) (T, error) {
	return future[T]{workflow.ExecuteActivity(ctx, name, in)}.get(ctx)
}

// Job activities (activities.JobActivities).

// publishEvents publishes messages in order (a local activity), retrying for up to
// giveUpAfter.
func publishEvents(ctx workflow.Context, msgs []events.Msg, giveUpAfter time.Duration) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: giveUpAfter,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
	return workflow.ExecuteLocalActivity(lctx, ActivityPublishEvents, activities.PublishEventsInput{Msgs: msgs}).Get(ctx, nil)
}

func launchGang(ctx workflow.Context, in activities.LaunchGangInput) (activities.LaunchGangResult, error) {
	return call[activities.LaunchGangResult](withShortActivity(ctx), ActivityLaunchGang, in)
}

// watchGang starts a WatchGang call; cancelling ctx cancels it, and it acknowledges the
// cancellation before its future completes.
func watchGang(ctx workflow.Context, in activities.WatchGangInput) future[activities.WatchGangResult] {
	return future[activities.WatchGangResult]{workflow.ExecuteActivity(withWatchActivity(ctx), ActivityWatchGang, in)}
}

func stopGang(ctx workflow.Context, ref backend.GangRef) error {
	return workflow.ExecuteActivity(withShortActivity(ctx), ActivityStopGang, ref).Get(ctx, nil)
}

func cleanupGang(ctx workflow.Context, ref backend.GangRef) error {
	return workflow.ExecuteActivity(withShortActivity(ctx), ActivityCleanupGang, ref).Get(ctx, nil)
}

// forwardLogs starts the log forwarder of an attempt; it runs until the gang ends.
func forwardLogs(ctx workflow.Context, in activities.ForwardLogsInput) future[activities.ForwardLogsResult] {
	return future[activities.ForwardLogsResult]{workflow.ExecuteActivity(workflow.WithHeartbeatTimeout(withForwarderActivity(ctx), longHeartbeat()), ActivityForwardLogs, in)}
}

// logProgress reads how far an attempt's forwarded log has come (the log drain's
// question whether its forwarder still sends); a few tries, as a wait hangs on it.
func logProgress(ctx workflow.Context, in activities.LogProgressInput) (int64, error) {
	return call[int64](withFewTries(withShortActivity(ctx)), ActivityLogProgress, in)
}

// latestCheckpoint is the newest complete checkpoint under a job's checkpoint URI.
func latestCheckpoint(ctx workflow.Context, in activities.LatestCheckpointInput) (string, error) {
	return call[string](withShortActivity(ctx), ActivityLatestCheckpoint, in)
}

// latestCheckpointToResume is latestCheckpoint for a restarted attempt: a store that
// cannot be read must not hold the recovery up for long, so it gives up after a few
// tries.
func latestCheckpointToResume(ctx workflow.Context, in activities.LatestCheckpointInput) (string, error) {
	return call[string](withFewTries(withShortActivity(ctx)), ActivityLatestCheckpoint, in)
}

// pruneCheckpoints is housekeeping: a store that cannot be reached must not hold the
// job's end up for long, nor fail it, so it gives up after a few tries.
func pruneCheckpoints(ctx workflow.Context, in activities.PruneCheckpointsInput) (activities.PruneCheckpointsResult, error) {
	return call[activities.PruneCheckpointsResult](withFewTries(withShortActivity(ctx)), ActivityPruneCheckpoints, in)
}

// checkNodes runs the pre-flight health check of an attempt's candidate nodes.
func checkNodes(ctx workflow.Context, in backend.CheckNodesInput) (backend.CheckNodesResult, error) {
	hctx := workflow.WithActivityOptions(withShortActivity(ctx), workflow.ActivityOptions{
		StartToCloseTimeout: in.Job.Spec.HealthCheck.Timeout.D() + 2*time.Minute,
		HeartbeatTimeout:    heartbeatTimeout,
	})
	return call[backend.CheckNodesResult](hctx, ActivityCheckNodes, in)
}

// recheckQuarantined probes the quarantined nodes that are due.
func recheckQuarantined(ctx workflow.Context, in activities.RecheckQuarantinedInput) (activities.RecheckQuarantinedResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// Node patches and pod creations around the probes, plus the probes.
		StartToCloseTimeout: in.ProbeTimeout + 3*time.Minute,
		HeartbeatTimeout:    heartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    3, // the next round tries again anyway
		},
	})
	return call[activities.RecheckQuarantinedResult](actx, ActivityRecheckQuarantined, in)
}

// Quota activities (activities.QuotaActivities).

// requestQuota asks the workspace's quota workflow for admission (a local activity:
// update-with-start of the quota workflow).
func requestQuota(ctx workflow.Context, in activities.RequestQuotaInput) (QuotaDecision, error) {
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
	err := workflow.ExecuteLocalActivity(lctx, ActivityRequestQuota, in).Get(ctx, &d)
	return d, err
}

// closedJobs are the jobs among ids that have ended.
func closedJobs(ctx workflow.Context, ids []string) ([]string, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	return call[[]string](actx, ActivityClosedJobs, ids)
}

// Pipeline activities (activities.PipelineActivities).

// buildStepJob turns a job step into its TrainingJob (a local activity without I/O); an
// invalid step is not retried.
func buildStepJob(ctx workflow.Context, in activities.BuildStepJobInput) (activities.BuildStepJobResult, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			MaximumAttempts:        3,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalidStep},
		},
	})
	var r activities.BuildStepJobResult
	err := workflow.ExecuteLocalActivity(lctx, ActivityBuildStepJob, in).Get(ctx, &r)
	return r, err
}

// jobMetrics reads a finished step job's last metrics.
func jobMetrics(ctx workflow.Context, in activities.JobMetricsInput) (activities.JobMetricsResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    10,
		},
	})
	return call[activities.JobMetricsResult](actx, ActivityJobMetrics, in)
}

// stopJob starts stopping a step's job through its stop update.
func stopJob(ctx workflow.Context, in activities.StopJobInput) doneFuture {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: stopJobTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    10,
		},
	})
	return doneFuture{workflow.ExecuteActivity(actx, ActivityStopJob, in)}
}

// Experiment activities (activities.ExperimentActivities).

// watchTrialMetrics starts reading a trial's metric reports, waiting up to wait for one.
func watchTrialMetrics(ctx workflow.Context, wait time.Duration, in activities.WatchTrialMetricsInput) future[activities.WatchTrialMetricsResult] {
	return future[activities.WatchTrialMetricsResult]{workflow.ExecuteActivity(withMetricsActivity(ctx, wait), ActivityWatchTrialMetrics, in)}
}

// stopTrialJob starts stopping a trial's job through its stop update.
func stopTrialJob(ctx workflow.Context, in activities.StopTrialJobInput) doneFuture {
	return doneFuture{workflow.ExecuteActivity(withShortActivity(ctx), ActivityStopTrialJob, in)}
}

// Schedule activities (activities.ScheduleActivities).

// checkNewData says whether anything under a URI was modified since a time.
func checkNewData(ctx workflow.Context, in activities.CheckNewDataInput) (activities.CheckNewDataResult, error) {
	return call[activities.CheckNewDataResult](withDataCheckActivity(ctx), ActivityCheckNewData, in)
}

// resolvePipelineTemplate reads the stored template a schedule names and makes the
// run's Pipeline; a few tries, as the data check.
func resolvePipelineTemplate(ctx workflow.Context, in activities.ResolvePipelineTemplateInput) (activities.ResolvePipelineTemplateResult, error) {
	return call[activities.ResolvePipelineTemplateResult](withTemplateActivity(ctx), ActivityResolvePipelineTemplate, in)
}

// waitScheduledJob waits until a run the schedule holds no child future for ends.
func waitScheduledJob(ctx workflow.Context, in activities.WaitScheduledJobInput) (activities.JobOutcome, error) {
	return call[activities.JobOutcome](withFollowActivity(ctx), ActivityWaitScheduledJob, in)
}

// stopScheduledJob stops a run through its stop update.
func stopScheduledJob(ctx workflow.Context, in activities.StopScheduledJobInput) (activities.StopScheduledJobResult, error) {
	return call[activities.StopScheduledJobResult](withFollowActivity(ctx), ActivityStopScheduledJob, in)
}

// Activity options.

// backoff is the retry policy the activities share: 1 s, doubling up to 30 s, at most
// maxAttempts tries (0: without limit), never retrying the error types named.
func backoff(maxAttempts int32, nonRetryable ...string) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		MaximumAttempts:        maxAttempts,
		NonRetryableErrorTypes: nonRetryable,
	}
}

// heartbeating is the options of an activity that heartbeats, so a dead worker is
// noticed within heartbeatTimeout, and runs at most timeout.
func heartbeating(ctx workflow.Context, timeout time.Duration, retry *temporal.RetryPolicy) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout, HeartbeatTimeout: heartbeatTimeout, RetryPolicy: retry,
	})
}

// withShortActivity is for activities that finish in seconds to minutes (launch, stop,
// cleanup, checkpoint lookup).
func withShortActivity(ctx workflow.Context) workflow.Context {
	return heartbeating(ctx, 5*time.Minute, backoff(10, activities.ErrTypeInvalidSpec))
}

// withFewTries replaces the retry policy: three tries, for calls that must not hold a
// workflow up for long.
func withFewTries(ctx workflow.Context) workflow.Context {
	return workflow.WithRetryPolicy(ctx, temporal.RetryPolicy{
		InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3,
	})
}

// withWatchActivity is for WatchGang, which the workflow cancels and waits for.
func withWatchActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: watchMaxWait + time.Minute,
		HeartbeatTimeout:    longHeartbeat(),
		WaitForCancellation: true,
		RetryPolicy:         backoff(0, activities.ErrTypeGangLost),
	})
}

// withLongActivity is for activities that last as long as a job (log forwarding).
func withLongActivity(ctx workflow.Context) workflow.Context {
	return heartbeating(ctx, 30*24*time.Hour, backoff(0))
}

// withMetricsActivity is for WatchTrialMetrics: it waits up to wait, heartbeating, and
// is retried without limit (NATS may be down for a while).
func withMetricsActivity(ctx workflow.Context, wait time.Duration) workflow.Context {
	return heartbeating(ctx, wait+time.Minute, backoff(0))
}

// withDataCheckActivity is for the S3 listing of skipIfNoNewDataUnder.
func withDataCheckActivity(ctx workflow.Context) workflow.Context {
	return heartbeating(ctx, scheduleActivityTimeout, backoff(5, activities.ErrTypeNoDataSource))
}

// withTemplateActivity is for reading a stored pipeline template: a key-value read,
// tried a few times before the run is recorded StartFailed.
func withTemplateActivity(ctx workflow.Context) workflow.Context {
	return withFewTries(withShortActivity(ctx))
}

// withFollowActivity is for waiting on and stopping jobs: as long as a job runs.
func withFollowActivity(ctx workflow.Context) workflow.Context {
	return withLongActivity(ctx)
}

// archiveLogs copies a finished job's logs to S3. It is housekeeping: a store that
// cannot be reached must not hold the job's end up for long, so it gives up after a
// few tries (the logs stay in the stream until its retention drops them).
func archiveLogs(ctx workflow.Context, in activities.ArchiveLogsInput) (activities.ArchiveLogsResult, error) {
	return call[activities.ArchiveLogsResult](withFewTries(withShortActivity(ctx)), ActivityArchiveLogs, in)
}
