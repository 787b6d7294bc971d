// Package events defines what OpenDLC publishes: CloudEvents-style status events, log
// records and metric reports, and the NATS subjects they travel on. The JetStream
// implementation is in events/jetstream.
package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// SpecVersion is the CloudEvents version the envelope follows.
const SpecVersion = "1.0"

// Event types. The version suffix changes when a type's data changes incompatibly.
const (
	// TypeJobPhase: a job moved to a new phase. Data: JobPhaseData.
	TypeJobPhase = "opendlc.job.phase.v1"
	// TypeJobMetric: a replica reported metrics. Data: MetricData.
	TypeJobMetric = "opendlc.job.metric.v1"
)

// Event is a CloudEvents-style envelope (structured JSON mode) with OpenDLC's
// workspace extension.
type Event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            time.Time       `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Workspace       string          `json:"workspace"`
	Data            json.RawMessage `json:"data"`
}

// New builds an event. The id must be deterministic (derived from the workflow and
// transition) so that a retried publish is recognised as a duplicate.
func New(id, typ, workspace, source, subject string, t time.Time, data any) (Event, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("events: marshal %s data: %w", typ, err)
	}
	return Event{
		SpecVersion:     SpecVersion,
		ID:              id,
		Source:          source,
		Type:            typ,
		Subject:         subject,
		Time:            t.UTC(),
		DataContentType: "application/json",
		Workspace:       workspace,
		Data:            b,
	}, nil
}

// JobPhaseData is the data of a TypeJobPhase event.
type JobPhaseData struct {
	Job       string            `json:"job"`
	UID       string            `json:"uid"`
	Seq       int               `json:"seq"`
	Phase     string            `json:"phase"`
	Previous  string            `json:"previous,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Message   string            `json:"message,omitempty"`
	Attempt   int               `json:"attempt"`
	ExitCode  *int32            `json:"exitCode,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Framework string            `json:"framework,omitempty"`
}

// MetricData is the data of a TypeJobMetric event: one `dlc:metric` line, one line a
// stdout collector matched, or one row of a metrics file.
type MetricData struct {
	Job     string `json:"job"`
	UID     string `json:"uid"`
	Attempt int    `json:"attempt"`
	Replica string `json:"replica"`
	// Seq is the log line's sequence number, or, for a metric file's row, the row's
	// number in the file (from 1).
	Seq    int64   `json:"seq"`
	Values Metrics `json:"values"`
	// Source is empty for a metric read from a log line, "file:<path>" for a row of a
	// metrics file (spec.metrics.collectors).
	Source string `json:"source,omitempty"`
}

// LogRecord is one line a replica wrote, as forwarded to the log stream.
type LogRecord struct {
	Workspace string    `json:"workspace"`
	Job       string    `json:"job"`
	UID       string    `json:"uid"`
	Attempt   int       `json:"attempt"`
	Role      string    `json:"role"`
	Index     int       `json:"index"`
	Replica   string    `json:"replica"`
	Node      string    `json:"node,omitempty"`
	Stream    string    `json:"stream"`
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Line      string    `json:"line"`
}

// Msg is one message to publish: a subject, a deterministic id used as Nats-Msg-Id,
// and the encoded payload.
type Msg struct {
	Subject string `json:"subject"`
	ID      string `json:"id"`
	Data    []byte `json:"data"`
}

// JobSource is the CloudEvents source of a job's events.
func JobSource(workspace, job string) string {
	return fmt.Sprintf("/opendlc/workspaces/%s/jobs/%s", workspace, job)
}

// JobStatusSubject carries a job's phase events.
func JobStatusSubject(workspace, job string) string {
	return fmt.Sprintf("dlc.%s.job.%s.status", workspace, job)
}

// JobMetricsSubject carries a job's metric events.
func JobMetricsSubject(workspace, job string) string {
	return fmt.Sprintf("dlc.%s.job.%s.metrics", workspace, job)
}

// JobLogSubject carries one replica's log records.
func JobLogSubject(workspace, job, role string, index int) string {
	return fmt.Sprintf("dlc.%s.job.%s.logs.%s.%d", workspace, job, role, index)
}

// JobLogsFilter matches every log subject of a job.
func JobLogsFilter(workspace, job string) string {
	return fmt.Sprintf("dlc.%s.job.%s.logs.>", workspace, job)
}
