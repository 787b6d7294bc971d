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
	// TypeScheduleRun: a schedule fired, skipped a run, or caught up. Data: ScheduleRunData.
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
	{TypeExperimentTrial, TrialData{}},
	{TypeScheduleRun, ScheduleRunData{}},
	{TypeNodeHealth, NodeHealthData{}},
	{TypeTriggerFired, TriggerFiredData{}},
	{TypeAudit, AuditData{}},
}

// TrialData is the data of a TypeExperimentTrial event.
type TrialData struct {
	Experiment string         `json:"experiment"`
	UID        string         `json:"uid"`
	Trial      string         `json:"trial"`
	Phase      string         `json:"phase"`
	Params     map[string]any `json:"params,omitempty"`
	// Objective is the trial's latest objective value, when reported.
	Objective *float64 `json:"objective,omitempty"`
	// EarlyStopped is set when the algorithm stopped the trial.
	EarlyStopped bool `json:"earlyStopped,omitempty"`
}

// ScheduleRunData is the data of a TypeScheduleRun event.
type ScheduleRunData struct {
	Schedule      string    `json:"schedule"`
	UID           string    `json:"uid"`
	Action        string    `json:"action" jsonschema:"enum=Started,enum=Skipped,enum=CaughtUp,enum=Missed"`
	ScheduledTime time.Time `json:"scheduledTime"`
	// Target is the job, experiment or pipeline the run started, if any.
	Target  string `json:"target,omitempty"`
	Message string `json:"message,omitempty"`
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
