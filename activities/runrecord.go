package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/opendlc/opendlc/internal/failpoint"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
)

// RunRecordActivities write run records (package runs) when a job, experiment or
// pipeline run ends.
type RunRecordActivities struct {
	// Store is the run record database; nil: records are not kept, and RecordRun
	// does nothing.
	Store runs.Store
}

// RecordRunInput is a finished run, as its workflow knows it. Exactly one of Job,
// Experiment and Pipeline is set, with its status.
type RecordRunInput struct {
	UID string `json:"uid"`
	// Parent is the uid of the experiment or pipeline run that started this run.
	Parent string `json:"parent,omitempty"`
	// Owner is the identity the run's workflow is listed under (DlcOwner).
	Owner string `json:"owner,omitempty"`

	Job       *schemas.TrainingJob `json:"job,omitempty"`
	JobStatus *schemas.JobStatus   `json:"jobStatus,omitempty"`
	// Demand is what the job's replicas hold together while an attempt runs.
	Demand runs.Demand `json:"demand,omitzero"`

	Experiment       *schemas.Experiment       `json:"experiment,omitempty"`
	ExperimentStatus *schemas.ExperimentStatus `json:"experimentStatus,omitempty"`

	Pipeline       *schemas.Pipeline       `json:"pipeline,omitempty"`
	PipelineStatus *schemas.PipelineStatus `json:"pipelineStatus,omitempty"`
}

// RecordRunResult says whether this call wrote the record (false: it existed, from an
// earlier try, or records are not kept).
type RecordRunResult struct {
	Written bool `json:"written"`
}

// FailpointAfterRunRecord is hit when a run record has been committed, before the
// activity answers: a test kills the worker there to show a retry writes nothing more.
const FailpointAfterRunRecord = "after-run-record"

// RecordRun writes the run's record once: a retry after a crash finds it written and
// writes nothing.
func (a *RunRecordActivities) RecordRun(ctx context.Context, in RecordRunInput) (RecordRunResult, error) {
	if a.Store == nil {
		return RecordRunResult{}, nil
	}
	rec, err := BuildRunRecord(in)
	if err != nil {
		return RecordRunResult{}, invalidSpec(err)
	}
	written, err := a.Store.Put(ctx, rec)
	if err != nil {
		return RecordRunResult{}, fmt.Errorf("record %s %s/%s: %w", rec.Kind, rec.Workspace, rec.Name, err)
	}
	activity.GetLogger(ctx).Info("run recorded", "kind", rec.Kind, "workspace", rec.Workspace, "name", rec.Name, "uid", rec.UID, "written", written)
	failpoint.Hit(FailpointAfterRunRecord)
	return RecordRunResult{Written: written}, nil
}

// BuildRunRecord makes the record of a finished run from what its workflow knows.
func BuildRunRecord(in RecordRunInput) (runs.Record, error) {
	switch {
	case in.Job != nil && in.JobStatus != nil:
		return jobRecord(in)
	case in.Experiment != nil && in.ExperimentStatus != nil:
		return experimentRecord(in)
	case in.Pipeline != nil && in.PipelineStatus != nil:
		return pipelineRecord(in)
	}
	return runs.Record{}, fmt.Errorf("run record of %s: no job, experiment or pipeline with its status", in.UID)
}

func jobRecord(in RecordRunInput) (runs.Record, error) {
	job, st := in.Job, in.JobStatus
	rec := baseRecord(runs.KindJob, job.Metadata, in, ending{string(st.Phase), st.Reason, st.Message, st.StartTime, st.FinishTime})
	rec.Image, rec.Inputs = job.Spec.Image, dataInputs(job.Spec.Data)
	rec.Checkpoint = st.LastCheckpoint
	rec.Metrics = finiteMetrics(st.Metrics)
	rec.Demand = in.Demand
	for i, at := range st.Attempts {
		ra := runs.Attempt{Attempt: at.Attempt, Start: at.StartTime, End: at.EndTime, Outcome: string(at.Outcome),
			Reason: string(at.Class), Message: at.Message, ResumedFrom: at.ResumedFrom}
		if at.Node != "" {
			ra.Nodes = append(ra.Nodes, at.Node)
		}
		if i == len(st.Attempts)-1 {
			// The last attempt's replicas are the status's.
			for _, r := range st.Replicas {
				if r.Node != "" && !slices.Contains(ra.Nodes, r.Node) {
					ra.Nodes = append(ra.Nodes, r.Node)
				}
			}
		}
		if ra.End == nil && st.FinishTime != nil {
			ra.End = st.FinishTime
		}
		rec.Attempts = append(rec.Attempts, ra)
	}
	if len(rec.Attempts) > 0 {
		started := rec.Attempts[0].Start
		rec.Started = &started
	}
	return withDocuments(rec, job, st)
}

func experimentRecord(in RecordRunInput) (runs.Record, error) {
	exp, st := in.Experiment, in.ExperimentStatus
	rec := baseRecord(runs.KindExperiment, exp.Metadata, in, ending{string(st.Phase), st.Reason, st.Message, st.StartTime, st.FinishTime})
	rec.Started = st.StartTime
	rec.Image, rec.Inputs = exp.Spec.TrialTemplate.Image, dataInputs(exp.Spec.TrialTemplate.Data)
	if st.BestTrial != nil {
		for _, t := range st.Trials {
			if t.ID == *st.BestTrial {
				// The best trial's checkpoint is on its job's record (Parent: this run).
				rec.Outputs = map[string]string{"bestTrial": strconv.Itoa(t.ID), "bestJob": t.Job}
			}
		}
	}
	if st.BestValue != nil {
		rec.Metrics = finiteMetrics(map[string]float64{exp.Spec.PrimaryObjective().Metric: *st.BestValue})
	}
	return withDocuments(rec, exp, st)
}

func pipelineRecord(in RecordRunInput) (runs.Record, error) {
	p, st := in.Pipeline, in.PipelineStatus
	rec := baseRecord(runs.KindPipeline, p.Metadata, in, ending{string(st.Phase), st.Reason, st.Message, st.StartTime, st.FinishTime})
	rec.Started = st.StartTime
	for _, s := range st.Steps {
		for k, v := range s.Outputs {
			if rec.Outputs == nil {
				rec.Outputs = map[string]string{}
			}
			rec.Outputs[s.Name+"."+k] = v
		}
	}
	return withDocuments(rec, p, st)
}

// ending is how a run ended, as each kind's status tells it: its terminal phase, why,
// and when it was submitted (accepted) and finished.
type ending struct {
	phase, reason, message string
	submitted, finished    *time.Time
}

// baseRecord is what every kind's record takes from the document's metadata, the
// workflow and its ending: names, labels, owner, origin, phase and times.
func baseRecord(kind runs.Kind, meta schemas.ObjectMeta, in RecordRunInput, e ending) runs.Record {
	return runs.Record{Workspace: meta.Workspace, Kind: kind, Name: meta.Name, UID: in.UID, Parent: in.Parent,
		Labels: meta.Labels, SubmittedBy: in.Owner, Origin: originOf(meta),
		Phase: e.phase, Reason: e.reason, Message: e.message,
		Submitted: timeOr(e.submitted, time.Time{}), Finished: timeOr(e.finished, time.Time{})}
}

// dataInputs are the URIs of a job's data sources (a PVC is not a URI).
func dataInputs(sources []schemas.DataSource) []string {
	var uris []string
	for _, d := range sources {
		if d.URI != "" {
			uris = append(uris, d.URI)
		}
	}
	return uris
}

// originOf is what started a run, from the labels the starters put on what they start:
// a pipeline step's job or experiment, an experiment's trial, a trigger's or a
// schedule's run; else a user.
func originOf(meta schemas.ObjectMeta) runs.Origin {
	l := meta.Labels
	switch {
	case l[schemas.LabelPipeline] != "":
		return runs.Origin{Kind: runs.OriginPipeline, Name: l[schemas.LabelPipeline], Step: l[schemas.LabelPipelineStep]}
	case l[schemas.LabelExperiment] != "" && l[schemas.LabelTrial] != "":
		o := runs.Origin{Kind: runs.OriginExperiment, Name: l[schemas.LabelExperiment]}
		if n, err := strconv.Atoi(l[schemas.LabelTrial]); err == nil {
			o.Trial = &n
		}
		return o
	case l[schemas.LabelTrigger] != "":
		return runs.Origin{Kind: runs.OriginTrigger, Name: l[schemas.LabelTrigger], Event: meta.Annotations[schemas.AnnotationTriggerEvent]}
	case l[schemas.LabelSchedule] != "":
		return runs.Origin{Kind: runs.OriginSchedule, Name: l[schemas.LabelSchedule]}
	}
	return runs.Origin{Kind: runs.OriginUser}
}

// withDocuments adds the document as it ran and its final status to rec.
func withDocuments(rec runs.Record, spec, status any) (runs.Record, error) {
	var err error
	if rec.Spec, err = json.Marshal(spec); err != nil {
		return rec, fmt.Errorf("run record of %s/%s: spec: %w", rec.Workspace, rec.Name, err)
	}
	if rec.Result, err = json.Marshal(status); err != nil {
		return rec, fmt.Errorf("run record of %s/%s: status: %w", rec.Workspace, rec.Name, err)
	}
	if rec.Finished.IsZero() {
		return rec, fmt.Errorf("run record of %s/%s: the run has no finish time", rec.Workspace, rec.Name)
	}
	return rec, nil
}

// finiteMetrics are the finite values of m (a record's metrics are numbers).
func finiteMetrics(m map[string]float64) map[string]float64 {
	var out map[string]float64
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[k] = v
	}
	return out
}

func timeOr(t *time.Time, def time.Time) time.Time {
	if t == nil {
		return def
	}
	return *t
}
