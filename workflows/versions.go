package workflows

// Versioning of workflow logic. No history from before the first version needs to
// replay (no release existed before it), so the code carries no compatibility branch:
// the histories in testdata replay against it. Every later change to workflow logic
// that running workflows' histories may predate goes behind workflow.GetVersion, with
// its change id in versions (the one table of change ids; docs/architecture.md's
// "Versioned changes" table lists the same rows, and TestVersionsTable checks both, and
// that every change id passed to workflow.GetVersion is in it) and a history recorded
// from the new code. docs/history.md, "Retiring workflow versions", says when a
// change's old branch may go.

// firstVersion is the day of the first version (YYYY-MM-DD): the re-baseline before
// the first release, which folded the changes made since 2026-12-01 into it.
const firstVersion = "2026-12-06"

// change is one versioned change to workflow logic.
type change struct {
	// id is the change id passed to workflow.GetVersion: a constant, never reused.
	id string
	// since is the day the change was made (YYYY-MM-DD), not before firstVersion.
	since string
	// what the new branch does, and the history or test that covers it.
	what string
}

// Change ids of the changes since the first version (versions).
const (
	// changeWorkspaceLocalActivity: the job reads its workspace's configuration with a
	// local activity (workspace.go).
	changeWorkspaceLocalActivity = "workspace-local-activity"
	// changePendingPhaseEvents: experiments and pipeline runs publish a Pending phase
	// event first (phase_events.go).
	changePendingPhaseEvents = "pending-phase-events"
	// changeScheduleRunEvents: a schedule publishes an opendlc.schedule.run.v1 event per
	// run it records (schedule_events.go).
	changeScheduleRunEvents = "schedule-run-events"
	// changeSchedulePipelineTemplateRef: a schedule's run of a stored pipeline template
	// (spec.action.pipelineTemplateRef) reads the template with an activity when it
	// fires (schedule_runs.go).
	changeSchedulePipelineTemplateRef = "schedule-pipeline-template-ref"
	// changeRunRecords: a job, an experiment and a pipeline run write their run record
	// (package runs) when they end (runrecord.go).
	changeRunRecords = "run-records"
	// changeLogDrainProgress: a finished job waits for its log forwarder while the
	// forwarded log grows, not a fixed logDrainTimeout (training_job_attempt.go).
	changeLogDrainProgress = "log-drain-progress"
)

// versions lists every versioned change, oldest first.
var versions = []change{
	{id: changeWorkspaceLocalActivity, since: "2026-12-06",
		what: "a job reads its workspace's configuration with a local activity in its first workflow task, not an activity and a workflow task more (training_job_workspace_local.json; the older histories replay the activity)"},
	{id: changePendingPhaseEvents, since: "2026-12-06",
		what: "an experiment and a pipeline run publish a Pending phase event (seq 1, no previous) before their Running one, as a job does (experiment_pending_event.json, pipeline_pending_event.json; the older histories publish none)"},
	{id: changeScheduleRunEvents, since: "2026-12-06",
		what: "a schedule publishes an opendlc.schedule.run.v1 event for each run it starts, skips, misses or sees end, through an outbox drained before continue-as-new (schedule_run_events.json; the older histories publish none)"},
	{id: changeSchedulePipelineTemplateRef, since: "2026-12-07",
		what: "a schedule whose action names a stored pipeline template (pipelineTemplateRef) reads it with the ResolvePipelineTemplate activity at each fire and starts the run it returns, or records StartFailed (schedule_pipeline_template_ref.json; no older history takes this path)"},
	{id: changeRunRecords, since: "2026-12-07",
		what: "a job, an experiment and a pipeline run write their run record with the RecordRun activity when they end, before their last events are published (run_record_job.json; the older histories write none)"},
	{id: changeLogDrainProgress, since: "2026-12-07",
		what: "a finished job whose log forwarder has not ended after logDrainTimeout reads how far the forwarded log came (the LogProgress activity) and waits another logDrainTimeout while it grows, at most logDrainMax in all; the older histories gave up at the first (TestLogDrainWaitsWhileTheForwarderSends; no recorded history takes this path)"},
}

// retiredChangeIDs are the change ids whose branches are gone (folded into the first
// version, or retired by the rule of docs/history.md): a history may still carry their
// markers, so none is ever used again.
var retiredChangeIDs = []string{
	// Folded into the first version of 2026-12-01.
	"running-before-succeeded", "gang-placement", "framework-outcome", "workspace-quota",
	"running-with-tolerated-failures", "recovery", "checkpoint-retention",
	"schedule-experiment-pipeline-actions",
	// Folded into the first version of 2026-12-06.
	"follow-keeps-watch", "placed-when-scheduled", "workspace-config", "timeout-from-launch",
	"experiment-slots", "experiment-carry-running", "job-continue-as-new",
	"experiment-phase-events", "pipeline-phase-events", "pipeline-step-retries", "log-archive",
	"spot-fallback-waiting", "elastic-replicas", "quota-tells-before-continuing",
}
