package schemas

import (
	"time"

	"github.com/opendlc/opendlc/events"
)

// JobPhase is where a TrainingJob is in its life cycle.
type JobPhase string

// Job phases. Succeeded, Failed and Stopped are terminal.
const (
	JobPending     JobPhase = "Pending"
	JobQueued      JobPhase = "Queued"
	JobHealthCheck JobPhase = "HealthCheck"
	JobLaunching   JobPhase = "Launching"
	JobRunning     JobPhase = "Running"
	JobRestarting  JobPhase = "Restarting"
	JobSucceeded   JobPhase = "Succeeded"
	JobFailed      JobPhase = "Failed"
	JobStopped     JobPhase = "Stopped"
)

// Terminal reports whether the phase is final.
func (p JobPhase) Terminal() bool {
	return p == JobSucceeded || p == JobFailed || p == JobStopped
}

// ReplicaPhase is the state of one replica (a process or a pod).
type ReplicaPhase string

// Replica phases.
const (
	ReplicaPending   ReplicaPhase = "Pending"
	ReplicaRunning   ReplicaPhase = "Running"
	ReplicaSucceeded ReplicaPhase = "Succeeded"
	ReplicaFailed    ReplicaPhase = "Failed"
	ReplicaStopped   ReplicaPhase = "Stopped"
)

// Terminal reports whether the replica has finished.
func (p ReplicaPhase) Terminal() bool {
	return p == ReplicaSucceeded || p == ReplicaFailed || p == ReplicaStopped
}

// ConditionType names a condition of a job.
type ConditionType string

// Job conditions, in the order a healthy job gains them.
const (
	// ConditionAccepted: the spec was validated and the job's workflow started.
	ConditionAccepted ConditionType = "Accepted"
	// ConditionHealthChecked: the last pre-flight health check ran; Message sums it up.
	ConditionHealthChecked ConditionType = "HealthChecked"
	// ConditionAdmitted: the workspace quota admitted the job (quota pool only).
	ConditionAdmitted ConditionType = "Admitted"
	// ConditionSchedulable: whether the gang fits the nodes it may use were they
	// empty. Set False (reason Unschedulable, the message naming what is short) while
	// it cannot, and True once a gang that could not fit has been launched; absent for
	// a job that always fit.
	ConditionSchedulable ConditionType = "Schedulable"
	// ConditionLaunched: every replica of the current attempt was created.
	ConditionLaunched ConditionType = "Launched"
	// ConditionRunning: every replica of the current attempt is running.
	ConditionRunning ConditionType = "Running"
	// ConditionCompleted: the job reached a terminal phase; Reason says which.
	ConditionCompleted ConditionType = "Completed"
	// ConditionSpotFallback: a spot job moved to the public pool (spec.resources.
	// spotFallback); Reason is AfterWaiting or AfterPreemptions. Absent otherwise.
	ConditionSpotFallback ConditionType = "SpotFallback"
)

// ConditionStatus is True, False or Unknown, as in Kubernetes.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one observed aspect of a job.
type Condition struct {
	Type               ConditionType   `json:"type"`
	Status             ConditionStatus `json:"status"`
	Reason             string          `json:"reason,omitempty"`
	Message            string          `json:"message,omitempty"`
	LastTransitionTime time.Time       `json:"lastTransitionTime"`
}

// ReplicaStatus is the observed state of one replica of the current attempt.
type ReplicaStatus struct {
	// Name is the replica's deterministic name: <job>-<role>-<index>-a<attempt>.
	Name     string       `json:"name"`
	Role     string       `json:"role"`
	Index    int          `json:"index"`
	Phase    ReplicaPhase `json:"phase"`
	ExitCode *int32       `json:"exitCode,omitempty"`
	// Node is where the replica runs: a Kubernetes node, or the worker host for local.
	Node string `json:"node,omitempty"`
	// Reason classifies a failed or stopped replica (FailureOOMKilled, FailureNodeLost...).
	Reason     FailureClass `json:"reason,omitempty"`
	Message    string       `json:"message,omitempty"`
	StartTime  *time.Time   `json:"startTime,omitempty"`
	FinishTime *time.Time   `json:"finishTime,omitempty"`
}

// TimelineEntry records one phase transition.
type TimelineEntry struct {
	Time    time.Time `json:"time"`
	Phase   JobPhase  `json:"phase"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
}

// JobStatus is what the TrainingJob workflow reports through its status query.
type JobStatus struct {
	Phase      JobPhase        `json:"phase"`
	Reason     string          `json:"reason,omitempty"`
	Message    string          `json:"message,omitempty"`
	Attempt    int             `json:"attempt"`
	Conditions []Condition     `json:"conditions,omitempty"`
	Replicas   []ReplicaStatus `json:"replicas,omitempty"`
	Timeline   []TimelineEntry `json:"timeline,omitempty"`
	// ExitCode is the exit code that decided a Failed job.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// LastCheckpoint is the newest complete checkpoint seen, s3://bucket/prefix/<step>.
	LastCheckpoint string     `json:"lastCheckpoint,omitempty"`
	StartTime      *time.Time `json:"startTime,omitempty"`
	FinishTime     *time.Time `json:"finishTime,omitempty"`

	// Restarts counts attempts restarted after a failure; Preemptions, attempts
	// restarted after a preemption (they do not use up maxRestarts).
	Restarts    int `json:"restarts,omitempty"`
	Preemptions int `json:"preemptions,omitempty"`
	// ExcludedNodes are nodes later attempts keep off: nodes that failed the job or
	// the pre-flight health check.
	ExcludedNodes []string `json:"excludedNodes,omitempty"`
	// Attempts is the history of the job's attempts, oldest first.
	Attempts []AttemptRecord `json:"attempts,omitempty"`
	// Health is the last pre-flight health check's result per node.
	Health []NodeHealth `json:"health,omitempty"`
	// Metrics are the last value of each metric the replicas of the last attempt
	// reported (as seen by the log forwarder; a forwarder restarted with its worker
	// sees only later lines). The metric events hold every report.
	Metrics events.Metrics `json:"metrics,omitempty"`
	// Resources summarises what the last attempt's replicas used, from their resource
	// samples (docs/metrics.md, "Resource use"); set when the attempt's log forwarding
	// ends. The resource events hold every sample.
	Resources *ResourceUse `json:"resources,omitempty"`
	// LogArchive is where the job's logs were archived when it ended,
	// s3://bucket/prefix/logs/<job>/<uid>/ (package logarchive); empty before, or when
	// nothing was archived.
	LogArchive string `json:"logArchive,omitempty"`
	// Elastic is the replica count of an elastic job (spec.elastic): wanted and
	// running, and how many lost replicas were replaced alone.
	Elastic *ElasticStatus `json:"elastic,omitempty"`
}

// FailureClass says why a replica or an attempt failed.
type FailureClass string

// Failure classes. The backend sets the replica-level ones; the workflow adds Hang and
// HealthCheck.
const (
	FailureError        FailureClass = "Error"        // exited with a non-zero code
	FailureSignal       FailureClass = "Signal"       // killed by a signal (exit code 128+n, e.g. 137)
	FailureOOMKilled    FailureClass = "OOMKilled"    // out of memory
	FailureEvicted      FailureClass = "Evicted"      // evicted (node pressure, eviction API)
	FailurePreempted    FailureClass = "Preempted"    // preempted by a higher-priority pod or a reclaimed spot node
	FailureNodeLost     FailureClass = "NodeLost"     // the node stopped reporting or went away
	FailurePodDeleted   FailureClass = "PodDeleted"   // deleted outside the job
	FailureImagePull    FailureClass = "ImagePull"    // the image cannot be pulled
	FailureConfig       FailureClass = "ConfigError"  // the pod spec cannot run (bad volume, secret...)
	FailureHang         FailureClass = "Hang"         // no output from any replica for hangTimeout
	FailureLaunch       FailureClass = "LaunchFailed" // the replicas could not be created
	FailureUnclassified FailureClass = "Unknown"
)

// EndedFromOutside reports whether a replica of this class did not end by itself but
// was ended: a signal, the kernel's OOM killer, an eviction or preemption, its node or
// pod gone. Such an end is a cause, never a peer's echo of another replica's failure.
func (c FailureClass) EndedFromOutside() bool {
	switch c {
	case FailureSignal, FailureOOMKilled, FailureEvicted, FailurePreempted, FailureNodeLost, FailurePodDeleted:
		return true
	}
	return false
}

// AttemptRecord is one attempt of a job: when it ran, how it ended and, for a failed
// attempt, how the failure was classified and what the recovery did.
type AttemptRecord struct {
	Attempt   int        `json:"attempt"`
	Pool      Pool       `json:"pool,omitempty"`
	StartTime time.Time  `json:"startTime"`
	EndTime   *time.Time `json:"endTime,omitempty"`
	// ResumedFrom is the checkpoint the attempt started from; empty for a fresh start.
	ResumedFrom string `json:"resumedFrom,omitempty"`
	// Outcome is the phase the attempt ended in (Succeeded, Failed, Stopped) or
	// Restarting when it was recovered.
	Outcome JobPhase `json:"outcome,omitempty"`
	// Class and Action classify a failure: Action is Retry, Preemption or Fail.
	Class   FailureClass `json:"class,omitempty"`
	Action  string       `json:"action,omitempty"`
	Replica string       `json:"replica,omitempty"`
	Node    string       `json:"node,omitempty"`
	Message string       `json:"message,omitempty"`
	// FaultTime is when the failure was seen; ReleasedTime when the attempt's replicas
	// were gone; the next attempt's StartTime is the relaunch.
	FaultTime    *time.Time `json:"faultTime,omitempty"`
	ReleasedTime *time.Time `json:"releasedTime,omitempty"`
	// RunningTime is when every replica of the attempt ran.
	RunningTime *time.Time `json:"runningTime,omitempty"`
}

// NodeHealth is one node's pre-flight health check result.
type NodeHealth struct {
	Node      string    `json:"node"`
	Healthy   bool      `json:"healthy"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	CheckedAt time.Time `json:"checkedAt"`
}

// Condition returns the condition of the given type, or nil.
func (s *JobStatus) Condition(t ConditionType) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// SetCondition adds or updates a condition; LastTransitionTime changes only when the
// status does.
func (s *JobStatus) SetCondition(c Condition) {
	if old := s.Condition(c.Type); old != nil {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

// ResourceUse summarises resource samples: of one replica, or of every replica of an
// attempt (the peaks are the replicas' highest, the means over every sample).
type ResourceUse struct {
	// Replica names the replica; empty for the attempt's summary.
	Replica string `json:"replica,omitempty"`
	// Samples is how many samples it summarises.
	Samples int `json:"samples"`
	// MeanCPU and PeakCPU are in cores.
	MeanCPU float64 `json:"meanCPU"`
	PeakCPU float64 `json:"peakCPU"`
	// PeakMemoryBytes is the most memory in use at a sample.
	PeakMemoryBytes int64 `json:"peakMemoryBytes"`
	// MemoryLimitBytes is the replicas' memory limit (the highest), 0 without one.
	MemoryLimitBytes int64 `json:"memoryLimitBytes,omitempty"`
	// GPUSamples counts the samples that read GPUs; MeanGPUUtilization (percent) and
	// PeakGPUMemoryBytes (of one GPU) are over those.
	GPUSamples         int     `json:"gpuSamples,omitempty"`
	MeanGPUUtilization float64 `json:"meanGPUUtilization,omitempty"`
	PeakGPUMemoryBytes int64   `json:"peakGPUMemoryBytes,omitempty"`
	// Replicas are the replicas' own summaries (in the attempt's summary only).
	Replicas []ResourceUse `json:"replicas,omitempty"`
}
