// Package activities holds OpenDLC's Temporal activities: the side effects the
// workflows ask for. JobActivities launch, watch, stop and clean up a job's gang
// through a backend, forward its logs, publish its events, and look after its
// checkpoints and nodes; ExperimentActivities read trial metrics and stop trials;
// PipelineActivities, QuotaActivities and ScheduleActivities serve the pipeline,
// quota and schedule workflows. An error that retrying cannot fix is returned as a
// non-retryable application error whose type the workflows branch on.
package activities
