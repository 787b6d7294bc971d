package schemas_test

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

func TestValidateMetricCollectors(t *testing.T) {
	stdout := func(re ...string) schemas.MetricCollector {
		if len(re) == 1 {
			return schemas.MetricCollector{Stdout: &schemas.StdoutCollector{Regex: re[0]}}
		}
		return schemas.MetricCollector{Stdout: &schemas.StdoutCollector{Regexes: re}}
	}
	file := func(p string, f schemas.MetricFileFormat) schemas.MetricCollector {
		return schemas.MetricCollector{File: &schemas.FileCollector{Path: p, Format: f}}
	}
	for name, tc := range map[string]struct {
		collectors []schemas.MetricCollector
		noForward  bool
		want       []string
		message    string
	}{
		"every kind": {collectors: []schemas.MetricCollector{
			stdout(`loss=(?P<loss>[0-9.eE+-]+) step=(?P<step>\d+)`),
			stdout(`acc (?P<accuracy>\S+)`, `(?P<val_loss>\S+) val`),
			file("metrics.jsonl", schemas.MetricFileJSONL),
			file("logs/lightning/version_0/metrics.csv", schemas.MetricFileCSV),
			file("out/trainer_state.json", schemas.MetricFileHFTrainerState),
		}, want: []string{}},
		"neither source": {collectors: []schemas.MetricCollector{{}}, want: []string{"spec.metrics.collectors[0]"}},
		"both sources": {collectors: []schemas.MetricCollector{{Stdout: &schemas.StdoutCollector{Regex: `(?P<a>\d)`}, File: &schemas.FileCollector{Path: "m.csv", Format: schemas.MetricFileCSV}}},
			want: []string{"spec.metrics.collectors[0]"}},
		"regex and regexes": {collectors: []schemas.MetricCollector{{Stdout: &schemas.StdoutCollector{Regex: `(?P<a>\d)`, Regexes: []string{`(?P<b>\d)`}}}},
			want: []string{"spec.metrics.collectors[0].stdout"}},
		"bad regex": {collectors: []schemas.MetricCollector{stdout(`(?P<loss>[0-9`)}, want: []string{"spec.metrics.collectors[0].stdout.regex"},
			message: "spec.metrics.collectors[0].stdout.regex: must be a regular expression: error parsing regexp: missing closing ]: `[0-9`"},
		"no named group":     {collectors: []schemas.MetricCollector{stdout(`loss=([0-9.]+)`)}, want: []string{"spec.metrics.collectors[0].stdout.regex"}},
		"only a step group":  {collectors: []schemas.MetricCollector{stdout(`x`, `step (?P<step>\d+)`)}, want: []string{"spec.metrics.collectors[0].stdout.regexes[0]", "spec.metrics.collectors[0].stdout.regexes[1]"}},
		"checkpoint pattern": {collectors: []schemas.MetricCollector{file("out/checkpoint-*/trainer_state.json", schemas.MetricFileHFTrainerState)}, want: []string{}},
		"pattern of another format, bad pattern": {collectors: []schemas.MetricCollector{file("logs/*.csv", schemas.MetricFileCSV),
			file("out/checkpoint-[/trainer_state.json", schemas.MetricFileHFTrainerState)},
			want: []string{"spec.metrics.collectors[0].file.path", "spec.metrics.collectors[1].file.path"}},
		"absolute path": {collectors: []schemas.MetricCollector{file("/etc/m.csv", schemas.MetricFileCSV), file("/tmp/../etc/m.csv", schemas.MetricFileCSV),
			file("/tmp/", schemas.MetricFileCSV)},
			want: []string{"spec.metrics.collectors[0].file.path", "spec.metrics.collectors[1].file.path", "spec.metrics.collectors[2].file.path"}},
		"the replica's /tmp": {collectors: []schemas.MetricCollector{file("/tmp/m.csv", schemas.MetricFileCSV),
			file("/tmp/out/checkpoint-*/trainer_state.json", schemas.MetricFileHFTrainerState)}, want: []string{}},
		"path outside": {collectors: []schemas.MetricCollector{file("a/../../m.csv", schemas.MetricFileCSV)}, want: []string{"spec.metrics.collectors[0].file.path"}},
		"s3 object":    {collectors: []schemas.MetricCollector{file("s3://dlc/runs/m.csv", schemas.MetricFileCSV)}, want: []string{}},
		"s3 prefix, bucket only, dot segments": {collectors: []schemas.MetricCollector{file("s3://dlc/runs/", schemas.MetricFileCSV),
			file("s3://dlc", schemas.MetricFileCSV), file("s3://dlc/a/../m.csv", schemas.MetricFileCSV), file("s3://Bad_Bucket/m.csv", schemas.MetricFileCSV)},
			want: []string{"spec.metrics.collectors[0].file.path", "spec.metrics.collectors[1].file.path", "spec.metrics.collectors[2].file.path", "spec.metrics.collectors[3].file.path"}},
		"no path, bad format": {collectors: []schemas.MetricCollector{file("", "tfevents")}, want: []string{"spec.metrics.collectors[0].file.format", "spec.metrics.collectors[0].file.path"},
			message: "spec.metrics.collectors[0].file.format: must be one of jsonl, csv, hf-trainer-state"},
		"no format": {collectors: []schemas.MetricCollector{file("m.csv", "")}, want: []string{"spec.metrics.collectors[0].file.format"}},
		"same file twice": {collectors: []schemas.MetricCollector{file("m.csv", schemas.MetricFileCSV), file("./m.csv", schemas.MetricFileJSONL)},
			want: []string{"spec.metrics.collectors[1].file.path"}},
		"without log forwarding": {collectors: []schemas.MetricCollector{file("m.csv", schemas.MetricFileCSV)}, noForward: true,
			want: []string{"spec.metrics.collectors[0]"}},
		"too many": {collectors: []schemas.MetricCollector{stdout(`(?P<a>1)`), stdout(`(?P<a>2)`), stdout(`(?P<a>3)`), stdout(`(?P<a>4)`),
			stdout(`(?P<a>5)`), stdout(`(?P<a>6)`), stdout(`(?P<a>7)`), stdout(`(?P<a>8)`), stdout(`(?P<a>9)`)}, want: []string{"spec.metrics.collectors"}},
	} {
		t.Run(name, func(t *testing.T) {
			job := schemastest.Job("j").Mutate(func(j *schemas.TrainingJob) {
				j.Spec.Metrics = &schemas.MetricsSpec{Collectors: tc.collectors}
				if tc.noForward {
					j.Spec.Logs.Forward = new(false)
				}
			}).Obj()
			errs := job.Validate()
			if diff := cmp.Diff(tc.want, errs.Fields()); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
			if tc.message != "" && (len(errs) == 0 || errs[0].Error() != tc.message) {
				t.Errorf("message %v, want %q", errs, tc.message)
			}
		})
	}
}

func TestValidateObjectiveAggregate(t *testing.T) {
	weighted := func(e *schemas.Experiment) {
		e.Spec.Objective = schemas.ObjectiveSpec{Metric: "score", Direction: schemas.Maximize, Aggregate: schemas.AggregateBest,
			Metrics: []schemas.WeightedMetric{{Metric: "accuracy", Weight: 1}, {Metric: "latency_ms", Weight: -0.01}}}
	}
	for name, tc := range map[string]struct {
		mutate  func(*schemas.Experiment)
		want    []string
		message string
	}{
		"every aggregate": {mutate: func(e *schemas.Experiment) {
			for _, a := range schemas.ObjectiveAggregates {
				e.Spec.Objective.Aggregate = a
				if errs := e.Validate(); errs != nil {
					t.Errorf("aggregate %s: %v", a, errs)
				}
			}
		}, want: []string{}},
		"unknown aggregate": {mutate: func(e *schemas.Experiment) { e.Spec.Objective.Aggregate = "final" },
			want: []string{"spec.objective.aggregate"}, message: "spec.objective.aggregate: must be one of last, best, mean, min, max"},
		"weighted":            {mutate: weighted, want: []string{}},
		"weighted, defaulted": {mutate: func(e *schemas.Experiment) { weighted(e); e.Default() }, want: []string{}},
		"one weighted metric": {mutate: func(e *schemas.Experiment) {
			weighted(e)
			e.Spec.Objective.Metrics = e.Spec.Objective.Metrics[:1]
		}, want: []string{"spec.objective.metrics"}},
		"bad weights and names": {mutate: func(e *schemas.Experiment) {
			weighted(e)
			e.Spec.Objective.StepMetric = "step"
			e.Spec.Objective.Metrics = append(e.Spec.Objective.Metrics,
				schemas.WeightedMetric{Metric: "accuracy", Weight: 0}, schemas.WeightedMetric{Metric: "score", Weight: math.Inf(1)},
				schemas.WeightedMetric{Metric: "step", Weight: 1}, schemas.WeightedMetric{Weight: 1})
		}, want: []string{"spec.objective.metrics[2].metric", "spec.objective.metrics[2].weight", "spec.objective.metrics[3].metric",
			"spec.objective.metrics[3].weight", "spec.objective.metrics[4].metric", "spec.objective.metrics[5].metric"}},
		"weighted with early stopping": {mutate: func(e *schemas.Experiment) {
			weighted(e)
			e.Spec.EarlyStopping.Rule = schemas.EarlyStoppingMedian
		}, want: []string{"spec.earlyStopping.rule"}},
		"aggregate of several objectives": {mutate: func(e *schemas.Experiment) {
			e.Spec.Objective = schemas.ObjectiveSpec{}
			e.Spec.Objectives = []schemas.ObjectiveSpec{
				{Metric: "accuracy", Direction: schemas.Maximize, Aggregate: schemas.AggregateMax},
				{Metric: "latency", Direction: schemas.Minimize, Metrics: []schemas.WeightedMetric{{Metric: "a", Weight: 1}, {Metric: "b", Weight: 1}}},
			}
			e.Spec.Algorithm.Name = schemas.AlgorithmNSGA2
		}, want: []string{"spec.objectives[0].aggregate", "spec.objectives[1].metrics"}},
	} {
		t.Run(name, func(t *testing.T) {
			e := testExp(tc.mutate)
			errs := e.Validate()
			if diff := cmp.Diff(tc.want, errs.Fields()); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
			if tc.message != "" && (len(errs) == 0 || errs[0].Error() != tc.message) {
				t.Errorf("message %v, want %q", errs, tc.message)
			}
		})
	}
}

// A trial template's metrics file path takes ${params.NAME}, so trials that run at
// once can write files of their own; an unknown parameter is refused at the path.
func TestTrialMetricsFilePathsTakeParameters(t *testing.T) {
	e := testExp(func(e *schemas.Experiment) {
		e.Spec.TrialTemplate.Metrics = &schemas.MetricsSpec{Collectors: []schemas.MetricCollector{
			{File: &schemas.FileCollector{Path: "runs/lr-${params.lr}/metrics.csv", Format: schemas.MetricFileCSV}},
			{File: &schemas.FileCollector{Path: "s3://dlc/vision/${params.batch_size}/m.jsonl", Format: schemas.MetricFileJSONL}},
			{Stdout: &schemas.StdoutCollector{Regex: `loss=(?P<loss>\S+)`}},
		}}
	})
	if errs := e.Validate(); errs != nil {
		t.Fatal(errs)
	}
	job, err := e.TrialJob("tune-t1", 1, map[string]string{"lr": "0.01", "l2": "0", "batch_size": "32", "epochs": "2"})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{job.Spec.Metrics.Collectors[0].File.Path, job.Spec.Metrics.Collectors[1].File.Path}
	if diff := cmp.Diff([]string{"runs/lr-0.01/metrics.csv", "s3://dlc/vision/32/m.jsonl"}, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	if p := e.Spec.TrialTemplate.Metrics.Collectors[0].File.Path; p != "runs/lr-${params.lr}/metrics.csv" {
		t.Errorf("the template changed: %s", p)
	}
	// A pipeline step's copy is substituted without touching the step.
	c := schemas.CopyJobSpec(&e.Spec.TrialTemplate)
	c.Metrics.Collectors[0].File.Path = "x"
	if e.Spec.TrialTemplate.Metrics.Collectors[0].File.Path == "x" {
		t.Error("CopyJobSpec shares the metrics files")
	}

	e.Spec.TrialTemplate.Metrics.Collectors[0].File.Path = "runs/${params.rate}/metrics.csv"
	if errs := e.Validate(); !slices.Contains(errs.Fields(), "spec.trialTemplate.metrics.collectors[0].file.path") {
		t.Errorf("unknown parameter in a path: %v", errs)
	}
}
