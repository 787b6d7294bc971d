package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// storedEvents is an EventReader over events kept in memory, by subject.
type storedEvents map[string][][]byte

func (s storedEvents) ReadUntil(_ context.Context, _, filter string, _ func() bool, fn func(string, []byte) error) error {
	for _, d := range s[filter] {
		if err := fn(filter, d); err != nil {
			return err
		}
	}
	return nil
}

func metricEvent(t *testing.T, uid, replica string, values map[string]float64) []byte {
	t.Helper()
	ev, err := events.New("id", events.TypeJobMetric, "ml", events.JobSource("ml", "train"), "train", time.Unix(0, 0),
		events.MetricData{Job: "train", UID: uid, Replica: replica, Values: values})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// JobMetrics keeps, per key, the last value the job's own run reported, whichever
// replica reported it; an earlier job of the same name does not count.
func TestJobMetricsLastValues(t *testing.T) {
	subject := events.JobMetricsSubject("ml", "train")
	a := &activities.PipelineActivities{Events: storedEvents{subject: {
		metricEvent(t, "old-uid", "train-worker-0-a0", map[string]float64{"accuracy": 0.99, "f1": 0.5}),
		metricEvent(t, "uid", "train-worker-0-a0", map[string]float64{"accuracy": 0.7, "loss": 0.9}),
		metricEvent(t, "uid", "train-worker-1-a0", map[string]float64{"loss": 0.8}),
		[]byte("not json"),
		metricEvent(t, "uid", "train-worker-0-a0", map[string]float64{"accuracy": 0.8}),
	}}}
	got, err := a.JobMetrics(context.Background(), activities.JobMetricsInput{Workspace: "ml", Job: "train", UID: "uid"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]float64{"accuracy": 0.8, "loss": 0.8}, map[string]float64(got.Values)); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}

// BuildStepJob names, labels and substitutes a step's job; a reference without a value
// is a non-retryable InvalidStep error.
func TestBuildStepJob(t *testing.T) {
	step := schemas.PipelineStep{
		Name: "evaluate",
		Job: &schemas.TrainingJobSpec{
			Framework: schemas.FrameworkCustom,
			Command:   []string{"eval", "${steps.train.outputs.checkpoint}", "${HOME}"},
			Env:       []schemas.EnvVar{{Name: "ACC", Value: "${steps.train.metrics.accuracy}"}},
			Roles: map[string]schemas.RoleSpec{"worker": {Replicas: 1,
				Args: []string{"--run", "${pipeline.name}", "--lr", "${params.lr}"}}},
			Checkpoint: &schemas.CheckpointSpec{URI: "s3://dlc/${pipeline.workspace}/eval"},
		},
		Outputs: map[string]string{"report": "s3://dlc/reports/${pipeline.name}"},
	}
	a := &activities.PipelineActivities{}
	in := activities.BuildStepJobInput{
		Run:    schemas.ObjectMeta{Name: "nightly", Workspace: "ml", Labels: map[string]string{"team": "cv"}},
		Step:   step,
		Params: map[string]string{"lr": "0.1"},
		Upstream: map[string]activities.StepResult{"train": {
			Outputs: map[string]string{"checkpoint": "s3://dlc/ckpt/000000000010"},
			Metrics: map[string]float64{"accuracy": 0.875},
		}},
	}
	got, err := a.BuildStepJob(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	j := got.Job
	checks := map[string][2]any{
		"name":          {"nightly-evaluate", j.Metadata.Name},
		"command":       {[]string{"eval", "s3://dlc/ckpt/000000000010", "${HOME}"}, j.Spec.Command},
		"role args":     {[]string{"--run", "nightly", "--lr", "0.1"}, j.Spec.Roles["worker"].Args},
		"env":           {[]schemas.EnvVar{{Name: "ACC", Value: "0.875"}, {Name: "DLC_OUTPUT_REPORT", Value: "s3://dlc/reports/nightly"}}, j.Spec.Env},
		"checkpoint":    {"s3://dlc/ml/eval", j.Spec.Checkpoint.URI},
		"labels":        {map[string]string{"team": "cv", schemas.LabelPipeline: "nightly", schemas.LabelPipelineStep: "evaluate"}, j.Metadata.Labels},
		"outputs":       {map[string]string{"job": "nightly-evaluate", "checkpointURI": "s3://dlc/ml/eval", "report": "s3://dlc/reports/nightly"}, got.Outputs},
		"keywords":      {[]string{"opendlc.io/pipeline-step=evaluate", "opendlc.io/pipeline=nightly", "team=cv"}, got.LabelKeywords},
		"defaults":      {schemas.PoolQuota, j.Spec.Resources.Pool},
		"template too":  {[]string{"eval", "${steps.train.outputs.checkpoint}", "${HOME}"}, step.Job.Command},
		"template role": {[]string{"--run", "${pipeline.name}", "--lr", "${params.lr}"}, step.Job.Roles["worker"].Args},
	}
	for name, c := range checks {
		if diff := cmp.Diff(c[0], c[1]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}

	in.Upstream["train"] = activities.StepResult{Outputs: map[string]string{}}
	_, err = a.BuildStepJob(context.Background(), in)
	if activities.ErrorType(err) != activities.ErrTypeInvalidStep ||
		!strings.Contains(err.Error(), "${steps.train.outputs.checkpoint}: step train's job saved no complete checkpoint") ||
		!strings.Contains(err.Error(), `${steps.train.metrics.accuracy}: step train's job did not report "accuracy"`) {
		t.Errorf("without upstream values: %v", err)
	}
}
