package storage

import (
	"slices"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

func TestContains(t *testing.T) {
	ws, _ := ParseLocation("s3://dlc/workspaces/a/")
	whole, _ := ParseLocation("s3://data")
	for _, tc := range []struct {
		loc  Location
		uri  string
		want bool
	}{
		{ws, "s3://dlc/workspaces/a", true},
		{ws, "s3://dlc/workspaces/a/", true},
		{ws, "s3://dlc/workspaces/a/ckpt/000000000001", true},
		{ws, "s3://dlc/workspaces/ab/ckpt", false},
		{ws, "s3://dlc/workspaces/b/ckpt", false},
		{ws, "s3://dlc/workspaces/a/../b/ckpt", false},
		{ws, "s3://dlc/workspaces/a//ckpt", false},
		{ws, "s3://dlc/workspaces/a/./ckpt", false},
		{ws, "s3://other/workspaces/a/ckpt", false},
		{ws, "s3://dlc", false},
		{ws, "/data/local", false},
		{whole, "s3://data/anything/here", true},
		{whole, "s3://data", true},
		{whole, "s3://data/x/../../y", false},
		{whole, "s3://database/x", false},
	} {
		if got := tc.loc.Contains(tc.uri); got != tc.want {
			t.Errorf("%s contains %s = %v, want %v", tc.loc, tc.uri, got, tc.want)
		}
	}
}

func TestParseLocation(t *testing.T) {
	for _, bad := range []string{"", "dlc/x", "s3://", "s3://Dlc", "s3://dlc/a/../b", "s3://dlc//a", "s3://dlc/./a"} {
		if _, err := ParseLocation(bad); err == nil {
			t.Errorf("ParseLocation(%q) accepted", bad)
		}
	}
	l, err := DefaultLocation("s3://dlc/workspaces", "team")
	if err != nil || l.String() != "s3://dlc/workspaces/team/" {
		t.Errorf("DefaultLocation = %v, %v", l, err)
	}
}

// TestCheckEveryKind finds the URIs of each kind's documents, templates included, and
// refuses those outside the locations with their field paths.
func TestCheckEveryKind(t *testing.T) {
	locs := []Location{{Bucket: "dlc", Prefix: "workspaces/a/"}}
	out := "s3://dlc/workspaces/b/x"
	spec := func() schemas.TrainingJobSpec {
		return schemas.TrainingJobSpec{
			Checkpoint: &schemas.CheckpointSpec{URI: out, ResumeFrom: out + "/000000000001"},
			Data: []schemas.DataSource{
				{Name: "in", URI: "s3://dlc/workspaces/a/data"},
				{Name: "theirs", URI: out},
				{Name: "own-creds", URI: "s3://elsewhere/x", SecretRef: "mine"},
				{Name: "local", URI: "/mnt/data"},
			},
		}
	}
	sp := spec()
	tmpl := spec()
	tmpl.Checkpoint = &schemas.CheckpointSpec{URI: "s3://dlc/workspaces/a/${params.run}"}
	tmpl2 := spec()
	tmpl2.Checkpoint = &schemas.CheckpointSpec{URI: "s3://elsewhere/${params.x}"}
	for _, tc := range []struct {
		name string
		doc  any
		want []string
	}{
		{"job", &schemas.TrainingJob{Spec: spec()},
			[]string{"spec.checkpoint.uri", "spec.checkpoint.resumeFrom", "spec.data[1].uri"}},
		{"experiment", &schemas.Experiment{Spec: schemas.ExperimentSpec{TrialTemplate: spec()}},
			[]string{"spec.trialTemplate.checkpoint.uri", "spec.trialTemplate.checkpoint.resumeFrom", "spec.trialTemplate.data[1].uri"}},
		{"pipeline", &schemas.Pipeline{Spec: schemas.PipelineSpec{Steps: []schemas.PipelineStep{{Name: "s", Job: &sp}}}},
			[]string{"spec.steps[0].job.checkpoint.uri", "spec.steps[0].job.checkpoint.resumeFrom", "spec.steps[0].job.data[1].uri"}},
		{"schedule", &schemas.Schedule{Spec: schemas.ScheduleSpec{
			RunOptions: schemas.ScheduleRunOptions{SkipIfNoNewDataUnder: out},
			Action:     schemas.ScheduleAction{JobTemplate: &schemas.JobTemplate{Spec: spec()}}}},
			[]string{"spec.action.jobTemplate.spec.checkpoint.uri", "spec.action.jobTemplate.spec.checkpoint.resumeFrom",
				"spec.action.jobTemplate.spec.data[1].uri", "spec.runOptions.skipIfNoNewDataUnder"}},
		{"trigger template inside", &schemas.Trigger{Spec: schemas.TriggerSpec{Action: schemas.TriggerAction{Job: &tmpl}}},
			[]string{"spec.action.job.data[1].uri"}},
		{"trigger template anywhere", &schemas.Trigger{Spec: schemas.TriggerSpec{Action: schemas.TriggerAction{Job: &tmpl2}}},
			[]string{"spec.action.job.checkpoint.uri", "spec.action.job.data[1].uri"}},
	} {
		got := Check(tc.doc, locs).Fields()
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: refused %v, want %v", tc.name, got, want)
		}
	}
	if errs := Check(&schemas.TrainingJob{Spec: spec()}, nil); errs != nil {
		t.Errorf("no locations (unrestricted): %v", errs)
	}
}

// A metrics file collector's s3:// path is read by the worker: it must be inside the
// workspace's storage; a path relative to the working directory is no URI.
func TestMetricFileCollectorsAreChecked(t *testing.T) {
	locs := []Location{{Bucket: "dlc", Prefix: "workspaces/a/"}}
	job := &schemas.TrainingJob{Spec: schemas.TrainingJobSpec{Metrics: &schemas.MetricsSpec{Collectors: []schemas.MetricCollector{
		{File: &schemas.FileCollector{Path: "s3://dlc/workspaces/a/runs/m.jsonl", Format: schemas.MetricFileJSONL}},
		{File: &schemas.FileCollector{Path: "s3://dlc/workspaces/b/runs/m.jsonl", Format: schemas.MetricFileJSONL}},
		{File: &schemas.FileCollector{Path: "out/trainer_state.json", Format: schemas.MetricFileHFTrainerState}},
		{Stdout: &schemas.StdoutCollector{Regex: `(?P<loss>\S+)`}},
	}}}}
	if got := Check(job, locs).Fields(); !slices.Equal(got, []string{"spec.metrics.collectors[1].file.path"}) {
		t.Errorf("refused %v", got)
	}
	exp := &schemas.Experiment{Spec: schemas.ExperimentSpec{TrialTemplate: job.Spec}}
	if got := Check(exp, locs).Fields(); !slices.Equal(got, []string{"spec.trialTemplate.metrics.collectors[1].file.path"}) {
		t.Errorf("experiment: refused %v", got)
	}
}
