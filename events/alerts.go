package events

import (
	"fmt"
	"time"
)

// TypeAlert is the type of the event that says a notification rule's alert started
// or stopped firing for a job. Data: AlertData. Published on AlertSubject by the
// notification dispatcher (docs/alerts.md).
const TypeAlert = "opendlc.alert.v1"

// Alert states.
const (
	// AlertFiring: the rule's condition holds for the job.
	AlertFiring = "firing"
	// AlertResolved: the condition no longer holds, or the job stopped running.
	AlertResolved = "resolved"
)

// AlertData is the data of a TypeAlert event: one alert of one rule about one job.
type AlertData struct {
	// Rule is the notification rule whose alert this is.
	Rule string `json:"rule"`
	// Job is the job the alert is about.
	Job string `json:"job"`
	// Metric is the metric the alert watches.
	Metric string `json:"metric"`
	// State is firing or resolved.
	State string `json:"state" jsonschema:"enum=firing,enum=resolved"`
	// Condition is the rule's condition in words: "below 10 for 15m0s", "absent for 10m0s".
	Condition string `json:"condition"`
	// Value is the sample that made the alert fire or resolve; absent for an absent
	// metric, and when the alert resolved because the job stopped.
	Value *float64 `json:"value,omitempty"`
	// Threshold is the rule's above or below.
	Threshold *float64 `json:"threshold,omitempty"`
	// Since is when the condition started to hold: the first sample of the window, or
	// the last time the metric was seen (or the job started running) for an absent
	// metric. A firing and its resolution carry the same Since.
	Since time.Time `json:"since"`
	// Reason says why a resolved alert resolved: Recovered (a sample broke the
	// condition, or the metric was reported again), JobEnded (the job left Running) or
	// RuleChanged (the rule's alert was changed or deleted).
	Reason string `json:"reason,omitempty" jsonschema:"enum=Recovered,enum=JobEnded,enum=RuleChanged"`
	// Message is a one-line summary: "gpu.utilization below 10 for 15m0s (last 3.5)".
	Message string `json:"message"`
	// Labels are the job's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// AlertSubject carries a rule's alert events.
func AlertSubject(workspace, rule string) string {
	return fmt.Sprintf("dlc.%s.alert.%s", workspace, rule)
}

// AlertSource is the CloudEvents source of a rule's alert events.
func AlertSource(workspace, rule string) string {
	return fmt.Sprintf("/opendlc/workspaces/%s/notificationrules/%s", workspace, rule)
}
