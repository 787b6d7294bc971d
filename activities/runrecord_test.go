package activities

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
)

func TestBuildRunRecordOfAJob(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	at := func(m int) *time.Time { v := t0.Add(time.Duration(m) * time.Minute); return &v }
	job := &schemas.TrainingJob{Metadata: schemas.ObjectMeta{Name: "train", Workspace: "team",
		Labels: map[string]string{schemas.LabelSchedule: "nightly", "app": "ctr"}},
		Spec: schemas.TrainingJobSpec{Image: "trainer:1", Data: []schemas.DataSource{{Name: "clicks", URI: "s3://dlc/team/clicks/"}}}}
	st := &schemas.JobStatus{Phase: schemas.JobSucceeded, Reason: "Completed", StartTime: at(0), FinishTime: at(95),
		LastCheckpoint: "s3://dlc/team/ckpt/step-00000020/",
		Metrics:        map[string]float64{"loss": 0.25, "bad": math.NaN()},
		Attempts: []schemas.AttemptRecord{
			{Attempt: 0, StartTime: *at(1), EndTime: at(30), Outcome: schemas.JobRestarting, Class: schemas.FailureNodeLost, Node: "node-a"},
			{Attempt: 1, StartTime: *at(31), ResumedFrom: "s3://dlc/team/ckpt/step-00000010/"},
		},
		Replicas: []schemas.ReplicaStatus{{Name: "worker-0", Node: "node-b"}, {Name: "worker-1", Node: "node-b"}}}
	rec, err := BuildRunRecord(RecordRunInput{UID: "u1", Owner: "alice", Job: job, JobStatus: st, Demand: runs.Demand{GPU: 2, CPU: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Kind != runs.KindJob || rec.Workspace != "team" || rec.Name != "train" || rec.UID != "u1" || rec.Phase != "Succeeded" || rec.SubmittedBy != "alice" {
		t.Errorf("record = %+v", rec)
	}
	if rec.Origin.Kind != runs.OriginSchedule || rec.Origin.Name != "nightly" {
		t.Errorf("origin = %+v, want the schedule nightly", rec.Origin)
	}
	if !rec.Submitted.Equal(t0) || rec.Started == nil || !rec.Started.Equal(*at(1)) || !rec.Finished.Equal(*at(95)) {
		t.Errorf("times: submitted %s started %v finished %s", rec.Submitted, rec.Started, rec.Finished)
	}
	if len(rec.Attempts) != 2 || rec.Attempts[0].Reason != "NodeLost" || strings.Join(rec.Attempts[0].Nodes, ",") != "node-a" ||
		strings.Join(rec.Attempts[1].Nodes, ",") != "node-b" || rec.Attempts[1].End == nil || !rec.Attempts[1].End.Equal(*at(95)) {
		t.Errorf("attempts = %+v", rec.Attempts)
	}
	if len(rec.Metrics) != 1 || rec.Metrics["loss"] != 0.25 {
		t.Errorf("metrics = %v, want loss only (NaN left out)", rec.Metrics)
	}
	if rec.Checkpoint != st.LastCheckpoint || len(rec.Inputs) != 1 || rec.Inputs[0] != "s3://dlc/team/clicks/" || rec.Image != "trainer:1" {
		t.Errorf("lineage: checkpoint %q inputs %v image %q", rec.Checkpoint, rec.Inputs, rec.Image)
	}
	if len(rec.Spec) == 0 || len(rec.Result) == 0 {
		t.Error("the record holds no spec or result")
	}

	st.FinishTime = nil
	if _, err := BuildRunRecord(RecordRunInput{UID: "u1", Job: job, JobStatus: st}); err == nil || !strings.Contains(err.Error(), "finish time") {
		t.Errorf("a run without a finish time: %v, want an error naming it", err)
	}
	if _, err := BuildRunRecord(RecordRunInput{UID: "u1"}); err == nil {
		t.Error("an input with no run: no error")
	}
}

func TestOriginOfLabels(t *testing.T) {
	trial := 3
	for name, tc := range map[string]struct {
		labels map[string]string
		want   runs.Origin
	}{
		"user":     {nil, runs.Origin{Kind: runs.OriginUser}},
		"trigger":  {map[string]string{schemas.LabelTrigger: "on-data"}, runs.Origin{Kind: runs.OriginTrigger, Name: "on-data", Event: "ev-1"}},
		"pipeline": {map[string]string{schemas.LabelPipeline: "loop", schemas.LabelPipelineStep: "train", schemas.LabelSchedule: "nightly"}, runs.Origin{Kind: runs.OriginPipeline, Name: "loop", Step: "train"}},
		"trial":    {map[string]string{schemas.LabelExperiment: "tune", schemas.LabelTrial: "3"}, runs.Origin{Kind: runs.OriginExperiment, Name: "tune", Trial: &trial}},
	} {
		got := originOf(schemas.ObjectMeta{Labels: tc.labels, Annotations: map[string]string{schemas.AnnotationTriggerEvent: "ev-1"}})
		if got.Kind != tc.want.Kind || got.Name != tc.want.Name || got.Step != tc.want.Step || got.Event != tc.want.Event || (got.Trial == nil) != (tc.want.Trial == nil) ||
			(got.Trial != nil && *got.Trial != *tc.want.Trial) {
			t.Errorf("%s: origin %+v, want %+v", name, got, tc.want)
		}
	}
}
