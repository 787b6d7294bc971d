package events

import (
	"fmt"
	"strings"
	"time"
)

// Event types of the features that publish through the same streams. Each has a data
// struct below and a JSON Schema in events/jsonschema/.
const (
	// TypeExperimentTrial: a trial of an HPO experiment changed phase or reported its
	// objective. Data: TrialData.
	TypeExperimentTrial = "opendlc.experiment.trial.v1"
	// TypeScheduleRun: a schedule started, buffered, skipped or missed a run, failed to
	// start it, or saw it end. Data: ScheduleRunData.
	TypeScheduleRun = "opendlc.schedule.run.v1"
	// TypeNodeHealth: a node's pre-flight health check result. Data: NodeHealthData.
	TypeNodeHealth = "opendlc.node.health.v1"
	// TypeTriggerFired: an inbound event matched a trigger and started work. Data:
	// TriggerFiredData.
	TypeTriggerFired = "opendlc.trigger.fired.v1"
)

// Types lists every event type with an example of its data, in a stable order.
var Types = []struct {
	Type string
	Data any
}{
	{TypeJobPhase, JobPhaseData{}},
	{TypeJobMetric, MetricData{}},
	{TypeJobResources, ResourceData{}},
	{TypeExperimentTrial, TrialData{}},
	{TypeScheduleRun, ScheduleRunData{}},
	{TypeNodeHealth, NodeHealthData{}},
	{TypeTriggerFired, TriggerFiredData{}},
	{TypeAlert, AlertData{}},
	{TypeAudit, AuditData{}},
}

// TrialData is the data of a TypeExperimentTrial event.
type TrialData struct {
	Experiment string `json:"experiment"`
	UID        string `json:"uid"`
	// TrialID is the trial's number in the experiment, from 0, as the experiment's
	// status numbers its trials (status.trials[].id, status.bestTrial).
	TrialID int `json:"trialId"`
	// Seq numbers this trial's events from 1, in the order of its transitions (each
	// trial counts its own; the event id keeps the experiment's shared counter).
	Seq int `json:"seq"`
	// Trial names the TrainingJob of the trial's current try (a new job per retried
	// try). There is deliberately no "job" field: notification rules read a "job" field
	// as the event's job (for matching and per-job ordering), and trial events are
	// matched and ordered by their experiment, the event's subject.
	Trial  string         `json:"trial"`
	Phase  string         `json:"phase"`
	Params map[string]any `json:"params,omitempty"`
	// Objective is the trial's latest objective value, when reported.
	Objective *float64 `json:"objective,omitempty"`
	// EarlyStopped is set when the algorithm stopped the trial.
	EarlyStopped bool `json:"earlyStopped,omitempty"`
}

// ScheduleRunData is the data of a TypeScheduleRun event: what became of one run of a
// schedule. A run that starts has a Started event and, once the schedule sees it end, a
// Finished one.
type ScheduleRunData struct {
	Schedule string `json:"schedule"`
	// UID tells apart schedules of the same name (a deleted and re-created one).
	UID string `json:"uid"`
	// Seq numbers the schedule's run events from 1, in the order they were recorded.
	Seq int `json:"seq"`
	// Action is what happened: the run Started (its job, experiment or pipeline was
	// started, or already existed), was Buffered by the overlap policy until the running
	// runs end, was Skipped (overlap policy, or no new data), was Missed (the control
	// plane was down longer than the catch-up window), could not start (StartFailed), or
	// Finished (its outcome says how).
	Action string `json:"action" jsonschema:"enum=Started,enum=Buffered,enum=Skipped,enum=Missed,enum=StartFailed,enum=Finished"`
	// Outcome is the run's outcome as the schedule's status lists it (status.history[].outcome).
	Outcome string `json:"outcome" jsonschema:"enum=Running,enum=Buffered,enum=Succeeded,enum=Failed,enum=Stopped,enum=Skipped,enum=Missed,enum=NoNewData,enum=StartFailed,enum=Unknown"`
	// Trigger says why the run happened: Schedule, Catchup, Trigger or Backfill.
	Trigger string `json:"trigger" jsonschema:"enum=Schedule,enum=Catchup,enum=Trigger,enum=Backfill"`
	// ScheduledTime is the nominal time the run stands for.
	ScheduledTime time.Time `json:"scheduledTime"`
	// Kind is what the run starts: TrainingJob, Experiment or Pipeline.
	Kind string `json:"kind" jsonschema:"enum=TrainingJob,enum=Experiment,enum=Pipeline"`
	// Target is the job, experiment or pipeline run the run started, if any.
	Target string `json:"target,omitempty"`
	// StartTime is when the target was started; FinishTime when the run's outcome
	// became known.
	StartTime  *time.Time `json:"startTime,omitempty"`
	FinishTime *time.Time `json:"finishTime,omitempty"`
	Message    string     `json:"message,omitempty"`
	// Checkpoint is the latest checkpoint a finished run's job recorded.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// NodeHealthData is the data of a TypeNodeHealth event.
type NodeHealthData struct {
	Node   string        `json:"node"`
	Status string        `json:"status" jsonschema:"enum=Healthy,enum=Unhealthy,enum=Quarantined"`
	Job    string        `json:"job,omitempty"`
	Checks []HealthCheck `json:"checks,omitempty"`
}

// HealthCheck is one probe of a node health check.
type HealthCheck struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
}

// TriggerFiredData is the data of a TypeTriggerFired event.
type TriggerFiredData struct {
	Trigger string `json:"trigger"`
	// Source is the inbound subject and Key what matched (an S3 object key...).
	Source string `json:"source"`
	Key    string `json:"key,omitempty"`
	// Started names what the trigger started: kind and name.
	StartedKind string `json:"startedKind"`
	StartedName string `json:"startedName"`
}

// ExperimentTrialSubject carries an experiment's trial events.
func ExperimentTrialSubject(workspace, experiment string) string {
	return fmt.Sprintf("dlc.%s.experiment.%s.trial", workspace, experiment)
}

// ScheduleRunSubject carries a schedule's run events.
func ScheduleRunSubject(workspace, schedule string) string {
	return fmt.Sprintf("dlc.%s.schedule.%s.run", workspace, schedule)
}

// ScheduleSource is the CloudEvents source of a schedule's events.
func ScheduleSource(workspace, schedule string) string {
	return fmt.Sprintf("/opendlc/workspaces/%s/schedules/%s", workspace, schedule)
}

// NodeHealthSubject carries node health events. Nodes belong to no workspace: they
// are published under the reserved workspace "system". The node's name becomes one
// subject token: node names are DNS subdomains, whose dots would split it, so dots are
// mapped to "_" (which never appears in a node name: the mapping is one to one).
func NodeHealthSubject(node string) string {
	return fmt.Sprintf("dlc.system.node.%s.health", strings.ReplaceAll(node, ".", "_"))
}

// TriggerFiredSubject carries a trigger's fired events; TriggerInboundSubject is where
// the trigger listens.
func TriggerFiredSubject(workspace, trigger string) string {
	return fmt.Sprintf("dlc.%s.trigger.%s.fired", workspace, trigger)
}

// TriggerInboundSubject is where a trigger receives inbound events.
func TriggerInboundSubject(workspace, trigger string) string {
	return fmt.Sprintf("dlc.%s.trigger.%s", workspace, trigger)
}
