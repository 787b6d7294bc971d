package workflows

import "go.temporal.io/sdk/workflow"

// Versioning of workflow logic. Nothing ran in production before the first version,
// so it carries no compatibility branch: the histories in testdata were recorded at it.
// Every later change to workflow logic that running workflows' histories may predate
// goes behind workflow.GetVersion, with its change id in versions (the one table of
// change ids; docs/architecture.md's "Versioned changes" table lists the same rows, and
// TestVersionsTable checks both, and that every change id passed to
// workflow.GetVersion is in it) and a history recorded from the new code.

// firstVersion is the day of the first version (YYYY-MM-DD).
const firstVersion = "2026-12-01"

// change is one versioned change to workflow logic.
type change struct {
	// id is the change id passed to workflow.GetVersion: a constant, never reused.
	id string
	// since is the day the change was made (YYYY-MM-DD), not before firstVersion.
	since string
	// what the new branch does, and the history or test that covers it.
	what string
}

// versions lists every versioned change, oldest first.
var versions = []change{
	{id: changeFollowKeepsWatch, since: "2026-12-02",
		what: "the forwarder ending without a hang no longer cancels the pending gang watch; TestRecoveryRestartsAHungAttempt"},
	{changePlacedWhenScheduled, "2026-12-02", "an attempt is placed once every replica is scheduled on a node, not once every " +
		"replica runs, so a slow image pull no longer counts against the placement timeout " +
		"(TestTrainingJobPlacedWhenScheduled, training_job_placed_when_scheduled.json)"},
	{id: changeWorkspaceConfig, since: "2026-12-02", what: "a job reads its workspace's namespace and pod defaults from the registry " +
		"(activity ResolveWorkspace) when it starts, and runs every gang there; history training_job_workspace_config.json, " +
		"TestJobReadsWorkspaceConfigOnce, integration/kube TestWorkspaceNamespaceAndPodDefaults"},
	{id: changeTimeoutFromLaunch, since: "2026-12-02", what: "spec.timeout counts the run time from the first launch, " +
		"time Queued left out (before: from the start, Queued included); spec.queueTimeout fails a job Queued too long " +
		"with reason QueueTimeout; history training_job_queue_timeout.json, TestQueueTimeoutAndTimeoutFromLaunch"},
	{id: changeExperimentSlots, since: "2026-12-02", what: "an experiment starts a trial as soon as any slot frees " +
		"(before: trial N waited for trials 0..N-parallelism), suggested from every trial known then, and early stopping " +
		"compares a trial with every other trial's reports; TestExperimentSlotUtilisation, integration TestExperimentSlotsOnTheRealStack"},
	{id: changeExperimentCarry, since: "2026-12-02", what: "an experiment whose history is large continues as new with its " +
		"trials running, carrying their job run ids, metric sequences and pending stops, and the next run follows their jobs " +
		"(WaitScheduledJob) instead of waiting for them to end first; TestExperimentContinuesAsNewCarryingRunningTrials"},
	{id: changeJobContinueAsNew, since: "2026-12-02", what: "a TrainingJob continues as new once its history passes its bound " +
		"(continue_as_new.go), handing the running attempt over to the next run; TestTrainingJob30DaysBoundedHistory, " +
		"integration TestJobContinuesAsNew"},
	{id: changeExperimentPhaseEvents, since: "2026-12-02", what: "an experiment publishes an opendlc.experiment.phase.v1 " +
		"event at each phase change (workflows/phase_events.go); TestExperimentAndPipelinePhaseEvents"},
	{id: changePipelinePhaseEvents, since: "2026-12-02", what: "a pipeline run publishes an opendlc.pipeline.phase.v1 event " +
		"at each phase change of the run and of its steps, through an outbox of its own; TestExperimentAndPipelinePhaseEvents"},
	{id: changePipelineStepRetries, since: "2026-12-02", what: "job steps with retries run again as <run>-<step>-r<N> after " +
		"a backoff, and a try over the step's timeout is stopped and fails with reason StepTimeout; TestPipelineStepRetriesAndTimeout"},
	{id: changeLogArchive, since: "2026-12-02", what: "a job archives its logs to S3 when it ends (activity ArchiveLogs, " +
		"after the gang's cleanup) and records the archive in status.logArchive; integration TestLogArchive"},
	{id: changeSpotFallbackWaiting, since: "2026-12-02", what: "a spot attempt runs a spotFallback.afterWaiting timer while " +
		"it waits to be placed (Queued or Launching) and, when it fires, is released and the job relaunched in the public pool " +
		"(condition SpotFallback, reason AfterWaiting; before: only looked at when an attempt was planned); the fallback after " +
		"preemptions sets the condition too; TestSpotFallbackAfterWaitingWithoutPlacementTimeout, integration/kube TestSpotFallback*"},
	{id: changeElasticReplicas, since: "2026-12-02", what: "an elastic job is scaled by the scale update (activity ScaleGang) " +
		"and a lost replica of one is replaced alone (activity ReplaceReplica) instead of ending the attempt; " +
		"integration/kube TestElasticScale, TestElasticReplaceOnePod, integration TestElasticTorchrunReplace"},
	{id: changeQuotaTellsBeforeContinuing, since: "2026-12-06", what: "the workspace quota waits until the server has " +
		"delivered every quota-decision signal it sent before it continues as new (before: the signals of the jobs it " +
		"admitted in its last workflow task were dropped with the run, and those jobs waited Queued for ever, holding " +
		"their share); TestQuotaFloodEveryJobLearnsItsAdmission, integration TestQuotaFloodEveryJobAdmitted"},
}

// changeFollowKeepsWatch: when the log forwarder ends without a hang while the gang's
// watch is pending, follow keeps waiting on that watch instead of cancelling it and
// taking its empty result for the replicas.
const changeFollowKeepsWatch = "follow-keeps-watch"

// keepsWatch reports whether this run has changeFollowKeepsWatch. It is asked only
// where the behaviour differs, so histories that never reach that point carry no marker.
func keepsWatch(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, changeFollowKeepsWatch, workflow.DefaultVersion, 1) == 1
}
