package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/opendlc/opendlc/events"
)

// SubjectReader reads one subject of a stream piece by piece (events/jetstream.Client).
type SubjectReader interface {
	// ReadAfter delivers the messages of subject with a stream sequence greater than
	// after, in order, at most limit; it waits up to wait for the first and returns once
	// caught up.
	ReadAfter(ctx context.Context, stream, subject string, after uint64, limit int, wait time.Duration,
		fn func(seq uint64, data []byte) error) error
}

// TrialStopper sends updates to workflows: the part of a Temporal client that stops trial jobs.
type TrialStopper interface {
	UpdateWorkflow(ctx context.Context, options client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error)
}

// ExperimentActivities are the activities of the Experiment workflow: reading the
// trials' metric reports back from the event stream, and stopping trial jobs.
type ExperimentActivities struct {
	// Events reads the metric subjects of trial jobs.
	Events SubjectReader
	// EventStream is the stream that holds metric events (jetstream.EventsStream).
	EventStream string
	// Temporal stops trial jobs through their stop update.
	Temporal TrialStopper
	// Experiments reads earlier experiments for a warm start (ReadWarmStart).
	Experiments ExperimentQuerier
	// PollInterval bounds each wait inside WatchTrialMetrics, between heartbeats.
	// Default 2s.
	PollInterval time.Duration
}

// WatchTrialMetricsInput names a trial job's run and where reading resumes.
type WatchTrialMetricsInput struct {
	Workspace string `json:"workspace"`
	Job       string `json:"job"`
	// UID is the job's uid (its workflow's first run id): metric events of earlier jobs
	// of the same name are skipped.
	UID string `json:"uid"`
	// Metric is the objective; StepMetric numbers the reports.
	Metric     string `json:"metric"`
	StepMetric string `json:"stepMetric"`
	// AfterSeq is the stream sequence of the last message already read.
	AfterSeq uint64 `json:"afterSeq"`
	// MaxWait bounds the call when no report comes.
	MaxWait time.Duration `json:"maxWait"`
	// Drain returns at once with whatever is stored: the job has ended.
	Drain bool `json:"drain,omitempty"`
	// Others are the other objectives of a multi-objective experiment: their latest
	// values are returned in Others.
	Others []string `json:"others,omitempty"`
	// Components are the metrics of a weighted objective: each of their reports is
	// returned in Components.
	Components []string `json:"components,omitempty"`
}

// MetricReport is one value of the objective a trial reported.
type MetricReport struct {
	// Metric names the metric of a weighted objective's component (empty for the
	// objective itself).
	Metric string `json:"metric,omitempty"`
	// Step is the value of the step metric in the same report, if it had one.
	Step    *int64  `json:"step,omitempty"`
	Value   float64 `json:"value"`
	Replica string  `json:"replica,omitempty"`
	// NonFinite is "NaN", "Infinity" or "-Infinity" when the objective was not a finite
	// number (Value is then 0): the trial diverged, and its objective counts as failed.
	NonFinite string `json:"nonFinite,omitempty"`
}

// WatchTrialMetricsResult are the new reports and where the next read resumes.
type WatchTrialMetricsResult struct {
	Reports []MetricReport `json:"reports,omitempty"`
	// LastSeq is the stream sequence of the last message read (AfterSeq if none).
	LastSeq uint64 `json:"lastSeq"`
	// Others maps each of the input's other objectives that was reported, finite, in
	// the messages read to its latest value.
	Others map[string]float64 `json:"others,omitempty"`
	// Components are the reports of the input's components, in stream order (and in
	// the input's order within one event).
	Components []MetricReport `json:"components,omitempty"`
}

// maxReadBatch bounds the messages one read delivers.
const maxReadBatch = 512

// WatchTrialMetrics returns the objective values a trial job reported after AfterSeq:
// it waits (heartbeating) until at least one has arrived, MaxWait has passed, or, with
// Drain, at once. Its result depends only on its input and the stream, so a retry
// after a worker crash returns the same reports: nothing is lost or counted twice.
func (a *ExperimentActivities) WatchTrialMetrics(ctx context.Context, in WatchTrialMetricsInput) (WatchTrialMetricsResult, error) {
	if a.Events == nil {
		return WatchTrialMetricsResult{}, errors.New("experiment activities have no event reader")
	}
	poll := a.PollInterval
	if poll <= 0 {
		poll = 2 * time.Second
	}
	subject := events.JobMetricsSubject(in.Workspace, in.Job)
	res := WatchTrialMetricsResult{LastSeq: in.AfterSeq}
	deadline := time.Now().Add(in.MaxWait)
	for {
		wait := min(poll, time.Until(deadline))
		if in.Drain {
			wait = 0
		}
		read := 0
		err := a.Events.ReadAfter(ctx, a.EventStream, subject, res.LastSeq, maxReadBatch, wait, func(seq uint64, data []byte) error {
			read++
			res.LastSeq = seq
			if r, ok := parseTrialMetric(data, in); ok {
				res.Reports = append(res.Reports, r)
			}
			if len(in.Components) > 0 {
				res.Components = append(res.Components, componentReports(data, in)...)
			}
			if len(in.Others) > 0 {
				res.Others = otherObjectives(data, in, res.Others)
			}
			return nil
		})
		if err != nil {
			if workflowGone(ctx) {
				return watchEnded(ctx, in, res)
			}
			return WatchTrialMetricsResult{}, fmt.Errorf("read metrics of %s: %w", in.Job, err)
		}
		activity.RecordHeartbeat(ctx, res.LastSeq)
		if read == maxReadBatch {
			continue // one read delivers at most maxReadBatch: more may be stored
		}
		if in.Drain {
			return res, nil
		}
		if len(res.Reports) > 0 || len(res.Components) > 0 || !time.Now().Before(deadline) {
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			if workflowGone(ctx) {
				return watchEnded(ctx, in, res)
			}
			return WatchTrialMetricsResult{}, err
		}
	}
}

// parseTrialMetric reads the objective from a metric event of the trial's job.
func parseTrialMetric(data []byte, in WatchTrialMetricsInput) (MetricReport, bool) {
	d, ok := trialMetricData(data, in)
	if !ok {
		return MetricReport{}, false
	}
	return metricReport(d, in, in.Metric)
}

// trialMetricData is the data of a metric event of the trial's job.
func trialMetricData(data []byte, in WatchTrialMetricsInput) (events.MetricData, bool) {
	var ev events.Event
	if json.Unmarshal(data, &ev) != nil || ev.Type != events.TypeJobMetric {
		return events.MetricData{}, false
	}
	var d events.MetricData
	if json.Unmarshal(ev.Data, &d) != nil || d.UID != in.UID {
		return events.MetricData{}, false
	}
	return d, true
}

// metricReport is the report of metric in d, numbered by the step metric.
func metricReport(d events.MetricData, in WatchTrialMetricsInput, metric string) (MetricReport, bool) {
	v, ok := d.Values[metric]
	if !ok {
		return MetricReport{}, false
	}
	r := MetricReport{Value: v, Replica: d.Replica}
	if name := events.NonFiniteName(v); name != "" {
		r.Value, r.NonFinite = 0, name
	}
	if s, ok := d.Values[in.StepMetric]; ok && in.StepMetric != "" && events.NonFiniteName(s) == "" {
		step := int64(s)
		r.Step = &step
	}
	return r, true
}

// componentReports are the reports of a weighted objective's metrics in a metric event
// of the trial's job.
func componentReports(data []byte, in WatchTrialMetricsInput) []MetricReport {
	d, ok := trialMetricData(data, in)
	if !ok {
		return nil
	}
	var out []MetricReport
	for _, m := range in.Components {
		if r, ok := metricReport(d, in, m); ok {
			r.Metric = m
			out = append(out, r)
		}
	}
	return out
}

// otherObjectives records in into the finite values of in.Others that a metric event of
// the trial's job carries.
func otherObjectives(data []byte, in WatchTrialMetricsInput, into map[string]float64) map[string]float64 {
	var ev events.Event
	if json.Unmarshal(data, &ev) != nil || ev.Type != events.TypeJobMetric {
		return into
	}
	var d events.MetricData
	if json.Unmarshal(ev.Data, &d) != nil || d.UID != in.UID {
		return into
	}
	for _, m := range in.Others {
		if v, ok := d.Values[m]; ok && events.NonFiniteName(v) == "" {
			if into == nil {
				into = map[string]float64{}
			}
			into[m] = v
		}
	}
	return into
}

// StopTrialJobInput names the trial job's workflow and how to stop it. The update name
// and request are the caller's, so this package needs no workflow names.
type StopTrialJobInput struct {
	WorkflowID string `json:"workflowID"`
	UpdateName string `json:"updateName"`
	Request    any    `json:"request"`
}

// StopTrialJob sends the stop update to a trial's job and returns once the job has
// accepted it; the experiment learns the job's end from its child workflow. A job that
// has already finished is not an error.
func (a *ExperimentActivities) StopTrialJob(ctx context.Context, in StopTrialJobInput) error {
	defer keepAlive(ctx)()
	if a.Temporal == nil {
		return errors.New("experiment activities have no Temporal client")
	}
	_, err := a.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   in.WorkflowID,
		UpdateName:   in.UpdateName,
		Args:         []any{in.Request},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	if _, ok := errors.AsType[*serviceerror.NotFound](err); ok {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop %s: %w", in.WorkflowID, err)
	}
	return nil
}
