package workflows

// outcome is how something ends, or the state it moves to: a phase (a job's, an
// experiment's, a pipeline run's) with the reason and the message that its status,
// timeline and events record. Workflows pass outcomes, not (phase, reason, message).
type outcome[P ~string] struct {
	phase   P
	reason  string
	message string
}

// Reasons of a TrainingJob's phases (status.reason, the timeline and the
// opendlc.job.phase.v1 events). A terminal Completed condition has the phase as its
// reason.
const (
	// ReasonAccepted: the job, experiment or pipeline run was accepted (Pending).
	ReasonAccepted = "Accepted"
	// ReasonWorkspaceUnreadable: the workspace registry could not be read (Failed).
	ReasonWorkspaceUnreadable = "WorkspaceUnreadable"
	// ReasonQuotaUnavailable: the workspace's quota workflow could not be reached (Failed).
	ReasonQuotaUnavailable = "QuotaUnavailable"
	// ReasonQuotaExceeded: the job waits for its workspace quota (Queued), or alone asks
	// for more than the quota (Failed).
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonHealthCheck: the pre-flight health check runs (HealthCheck).
	ReasonHealthCheck = "HealthCheck"
	// ReasonNoHealthyNodes: the health check found no healthy node (Failed).
	ReasonNoHealthyNodes = "NoHealthyNodes"
	// ReasonLaunching: the gang is being created (Launching).
	ReasonLaunching = "Launching"
	// ReasonInsufficientResources: the gang does not fit in what the backend has free
	// yet (Queued).
	ReasonInsufficientResources = "InsufficientResources"
	// ReasonUnschedulable: the gang can never fit the nodes it may use, even empty
	// (Queued).
	ReasonUnschedulable = "Unschedulable"
	// ReasonPlacementTimeout: not every replica was placed within the placement timeout;
	// the gang is released and launched again after a backoff (Queued).
	ReasonPlacementTimeout = "PlacementTimeout"
	// ReasonQueueTimeout: the job waited in Queued longer than spec.queueTimeout (Failed).
	ReasonQueueTimeout = "QueueTimeout"
	// ReasonSpotFallback: a spot job falls back to the public pool (Queued, or the phase
	// it is in after its preemptions).
	ReasonSpotFallback = "SpotFallback"
	// ReasonLaunchFailed: the gang could not be created (Failed).
	ReasonLaunchFailed = "LaunchFailed"
	// ReasonAllReplicasRunning: every replica runs (Running).
	ReasonAllReplicasRunning = "AllReplicasRunning"
	// ReasonAllReplicasRan: the replicas ran to completion between two observations
	// (Running).
	ReasonAllReplicasRan = "AllReplicasRan"
	// ReasonScaled: an elastic job was scaled (Running).
	ReasonScaled = "Scaled"
	// ReasonReplicaReplaced: a lost replica of an elastic job was replaced alone
	// (Running).
	ReasonReplicaReplaced = "ReplicaReplaced"
	// ReasonRestarting: a failed attempt is restarted after a backoff (Restarting).
	ReasonRestarting = "Restarting"
	// ReasonAllReplicasSucceeded: every replica succeeded (Succeeded).
	ReasonAllReplicasSucceeded = "AllReplicasSucceeded"
	// ReasonLeaderSucceeded: the replica whose end decides the job (TensorFlow's chief,
	// MPI's launcher, Ray's head) succeeded (Succeeded).
	ReasonLeaderSucceeded = "LeaderSucceeded"
	// ReasonReplicaFailed: a replica failed (Failed).
	ReasonReplicaFailed = "ReplicaFailed"
	// ReasonReplicaStopped: a replica was stopped outside the job (Failed).
	ReasonReplicaStopped = "ReplicaStopped"
	// ReasonHang: no replica wrote a log line for spec.faultTolerance.hangTimeout (Failed).
	ReasonHang = "Hang"
	// ReasonTimeout: the job ran longer than spec.timeout (Failed).
	ReasonTimeout = "Timeout"
	// ReasonWatchFailed: the gang could not be watched (Failed).
	ReasonWatchFailed = "WatchFailed"
	// ReasonStopRequested: a stop was requested (a job Stopped, an experiment Stopping,
	// a pipeline run Stopped).
	ReasonStopRequested = "StopRequested"
)

// Reasons of a TrainingJob's conditions that are not phase reasons.
const (
	// ReasonAfterWaiting, ReasonAfterPreemptions: why the SpotFallback condition is True.
	ReasonAfterWaiting     = "AfterWaiting"
	ReasonAfterPreemptions = "AfterPreemptions"
	// ReasonScaleFailed: the Scaled condition is False, the last scale failed.
	ReasonScaleFailed = "ScaleFailed"
)

// Reasons of an Experiment's phases.
const (
	// ReasonStarted: the experiment (or a pipeline run) started (Running).
	ReasonStarted = "Started"
	// ReasonResumed: a Stopped experiment was resumed (Running).
	ReasonResumed = "Resumed"
	// ReasonNotResumed: a Stopped experiment was not resumed within its resume window
	// (Stopped, final).
	ReasonNotResumed = "NotResumed"
	// ReasonInvalidSpec: the search space or algorithm is invalid (Failed).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonTooManyFailedTrials: more trials failed than spec.maxFailedTrials (Failed).
	ReasonTooManyFailedTrials = "TooManyFailedTrials"
	// ReasonNoTrialCompleted: no trial completed with a value of the objective (Failed).
	ReasonNoTrialCompleted = "NoTrialCompleted"
	// ReasonAlgorithmFailed: the algorithm could not suggest a trial (Failed).
	ReasonAlgorithmFailed = "AlgorithmFailed"
	// ReasonCheckpointsUnreadable: PBT could not list a trial's checkpoints (Failed).
	ReasonCheckpointsUnreadable = "CheckpointsUnreadable"
	// ReasonGoalReached: a trial reached the objective's goal (Succeeded).
	ReasonGoalReached = "GoalReached"
	// ReasonMaxTrialsReached: spec.maxTrials trials ran (Succeeded).
	ReasonMaxTrialsReached = "MaxTrialsReached"
	// ReasonSearchSpaceExhausted: every point of a grid ran (Succeeded).
	ReasonSearchSpaceExhausted = "SearchSpaceExhausted"
)

// Reasons of a pipeline run's phases (ReasonStarted, ReasonStopRequested and these)
// and of its steps'.
const (
	// ReasonStepFailed: a step failed (the run Failed).
	ReasonStepFailed = "StepFailed"
	// ReasonAllStepsDone: every step succeeded or was skipped (the run Succeeded).
	ReasonAllStepsDone = "AllStepsDone"

	// ReasonDependencyNotSucceeded: a step the step depends on did not succeed (the
	// step is Skipped).
	ReasonDependencyNotSucceeded = "DependencyNotSucceeded"
	// ReasonConditionFalse: a condition the step depends on is false (Skipped).
	ReasonConditionFalse = "ConditionFalse"
	// ReasonInvalidCondition, ReasonConditionNotEvaluated, ReasonConditionEvaluated: a
	// condition step's expression is invalid, could not be evaluated (Failed), or was
	// (Succeeded).
	ReasonInvalidCondition      = "InvalidCondition"
	ReasonConditionNotEvaluated = "ConditionNotEvaluated"
	ReasonConditionEvaluated    = "ConditionEvaluated"
	// ReasonInvalidStep: the step's job could not be built (Failed).
	ReasonInvalidStep = "InvalidStep"
	// ReasonJobStarted: the step's job started (Running).
	ReasonJobStarted = "JobStarted"
	// ReasonJobExists: a job of the step's name exists already (Failed).
	ReasonJobExists = "JobExists"
	// ReasonJobFailed: the step's job could not run or failed (Failed, or Retrying);
	// a job that ended otherwise gives "Job" and its phase (JobStopped).
	ReasonJobFailed = "JobFailed"
	// ReasonJobSucceeded: the step's job succeeded (Succeeded).
	ReasonJobSucceeded = "JobSucceeded"
	// ReasonMetricsUnavailable: the step's job's metrics could not be read (Failed).
	ReasonMetricsUnavailable = "MetricsUnavailable"
	// ReasonRetrying: the step runs again after a failed try.
	ReasonRetrying = "Retrying"
	// ReasonStepTimeout: the step's try ran over the step's timeout.
	ReasonStepTimeout = "StepTimeout"
	// ReasonPipelineEnded: the step's job was stopped, or not retried, because the run
	// ended (Cancelled).
	ReasonPipelineEnded = "PipelineEnded"
	// ReasonPipelineFailed, ReasonPipelineStopped: the step did not run because the run
	// failed or was stopped (Skipped).
	ReasonPipelineFailed  = "PipelineFailed"
	ReasonPipelineStopped = "PipelineStopped"
)
