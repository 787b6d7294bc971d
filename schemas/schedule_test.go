package schemas_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
)

// sched returns a valid schedule of workspace vision, changed by each mutation.
func sched(mutate ...func(s *schemas.Schedule)) *schemas.Schedule {
	s := &schemas.Schedule{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindSchedule,
		Metadata:   schemas.ObjectMeta{Name: "nightly", Workspace: "vision"},
		Spec: schemas.ScheduleSpec{
			Cron:     "0 2 * * *",
			TimeZone: "Asia/Shanghai",
			Action: schemas.ScheduleAction{JobTemplate: &schemas.JobTemplate{
				Spec: job().Obj().Spec,
			}},
		},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// withExperiment makes a schedule's action the valid test experiment's spec, changed by
// mutate (when not nil).
func withExperiment(mutate func(t *schemas.ExperimentTemplate)) func(s *schemas.Schedule) {
	return func(s *schemas.Schedule) {
		t := &schemas.ExperimentTemplate{Metadata: schemas.TemplateMeta{Labels: map[string]string{"team": "cv"}}, Spec: testExp().Spec}
		if mutate != nil {
			mutate(t)
		}
		s.Spec.Action = schemas.ScheduleAction{ExperimentTemplate: t}
	}
}

// withPipeline makes a schedule's action the retrain pipeline (preprocess, train,
// evaluate, better, promote) with one parameter given, changed by mutate (when not nil).
func withPipeline(mutate func(t *schemas.PipelineTemplate)) func(s *schemas.Schedule) {
	return func(s *schemas.Schedule) {
		p, err := schemas.DecodePipeline([]byte(retrainPipeline))
		if err != nil {
			panic(err)
		}
		t := &schemas.PipelineTemplate{Params: map[string]string{"currentAccuracy": "0.85"}, Spec: p.Spec}
		if mutate != nil {
			mutate(t)
		}
		s.Spec.Action = schemas.ScheduleAction{PipelineTemplate: t}
	}
}

func TestScheduleValidate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		s    *schemas.Schedule
		want schemas.ErrorList
	}{
		"minimal":   {s: sched()},
		"defaulted": {s: sched(func(s *schemas.Schedule) { s.Default() })},
		"every field": {s: sched(func(s *schemas.Schedule) {
			end := t0.Add(24 * time.Hour)
			s.Spec.StartTime, s.Spec.EndTime = &t0, &end
			s.Spec.Jitter = schemas.Duration(24 * time.Hour)
			s.Spec.OverlapPolicy = schedule.CancelOther
			s.Spec.CatchupWindow = schemas.Duration(10 * time.Second)
			s.Spec.Paused, s.Spec.PauseNote = true, "data migration"
			s.Spec.HistoryLimit = 1000
			s.Spec.Action.JobTemplate.Metadata.Labels = map[string]string{"team": "cv"}
			s.Spec.Action.JobTemplate.Spec.Checkpoint = &schemas.CheckpointSpec{URI: "s3://ckpt/nightly", ResumeFrom: "s3://ckpt/nightly/000000000120"}
			s.Spec.RunOptions = schemas.ScheduleRunOptions{ResumeFromPreviousCheckpoint: true, SkipIfNoNewDataUnder: "s3://datasets/clicks/"}
		})},
		"seconds field":     {s: sched(func(s *schemas.Schedule) { s.Spec.Cron = "*/10 * * * * *" })},
		"every descriptor":  {s: sched(func(s *schemas.Schedule) { s.Spec.Cron = "@every 6h" })},
		"daily descriptor":  {s: sched(func(s *schemas.Schedule) { s.Spec.Cron = "@daily" })},
		"longest name":      {s: sched(func(s *schemas.Schedule) { s.Metadata.Name = strings.Repeat("n", 35) })},
		"empty zone is UTC": {s: sched(func(s *schemas.Schedule) { s.Spec.TimeZone = "" })},

		"invalid cron": {
			s: sched(func(s *schemas.Schedule) { s.Spec.Cron = "every night" }),
			want: schemas.ErrorList{{Field: "spec.cron",
				Detail: `invalid cron expression "every night": expected 5 to 6 fields, found 2: [every night]`}},
		},
		"cron out of range": {
			s: sched(func(s *schemas.Schedule) { s.Spec.Cron = "0 25 * * *" }),
			want: schemas.ErrorList{{Field: "spec.cron",
				Detail: `invalid cron expression "0 25 * * *": end of range (25) above maximum (23): 25`}},
		},
		"zone inside the expression": {
			s: sched(func(s *schemas.Schedule) { s.Spec.Cron = "CRON_TZ=UTC 0 2 * * *" }),
			want: schemas.ErrorList{{Field: "spec.cron",
				Detail: `invalid cron expression "CRON_TZ=UTC 0 2 * * *": give the time zone separately, not in the expression`}},
		},
		"unknown time zone": {
			s: sched(func(s *schemas.Schedule) { s.Spec.TimeZone = "Asia/Atlantis" }),
			want: schemas.ErrorList{{Field: "spec.timeZone",
				Detail: `unknown time zone "Asia/Atlantis": must be an IANA zone name such as Asia/Shanghai, Europe/Berlin or UTC`}},
		},
		"missing cron": {
			s:    sched(func(s *schemas.Schedule) { s.Spec.Cron = "" }),
			want: schemas.ErrorList{{Field: "spec.cron", Detail: "required"}},
		},
		"name too long for run names": {
			s: sched(func(s *schemas.Schedule) { s.Metadata.Name = strings.Repeat("n", 36) }),
			want: schemas.ErrorList{{Field: "metadata.name",
				Detail: "must be at most 35 characters for a Schedule: run names append '-' and 14 digits"}},
		},
		"bounds": {
			s: sched(func(s *schemas.Schedule) {
				before := t0.Add(-time.Hour)
				s.Spec.StartTime, s.Spec.EndTime = &t0, &before
				s.Spec.Jitter = schemas.Duration(25 * time.Hour)
				s.Spec.CatchupWindow = schemas.Duration(time.Second)
				s.Spec.HistoryLimit = 1001
				s.Spec.OverlapPolicy = "sometimes"
			}),
			want: schemas.ErrorList{
				{Field: "spec.catchupWindow", Detail: "must be between 10s and 8760h0m0s"},
				{Field: "spec.endTime", Detail: "must not be before startTime"},
				{Field: "spec.historyLimit", Detail: "must be <= 1000"},
				{Field: "spec.jitter", Detail: "must be at most 24h0m0s"},
				{Field: "spec.overlapPolicy", Detail: "must be one of skip, bufferOne, bufferAll, cancelOther, allowAll"},
			},
		},
		"negative durations": {
			s: sched(func(s *schemas.Schedule) { s.Spec.Jitter = -1; s.Spec.CatchupWindow = -1 }),
			want: schemas.ErrorList{
				{Field: "spec.catchupWindow", Detail: "must be between 10s and 8760h0m0s"},
				{Field: "spec.catchupWindow", Detail: "must not be negative"},
				{Field: "spec.jitter", Detail: "must not be negative"},
			},
		},
		"no action": {
			s:    sched(func(s *schemas.Schedule) { s.Spec.Action = schemas.ScheduleAction{} }),
			want: schemas.ErrorList{{Field: "spec.action", Detail: "must set one of jobTemplate, experimentTemplate, pipelineTemplate, pipelineTemplateRef"}},
		},
		"experiment template":           {s: sched(withExperiment(nil))},
		"pipeline template":             {s: sched(withPipeline(nil))},
		"defaulted experiment template": {s: sched(withExperiment(nil), func(s *schemas.Schedule) { s.Default() })},
		"longest name for experiments": {s: sched(withExperiment(nil), func(s *schemas.Schedule) {
			s.Metadata.Name = strings.Repeat("n", schemas.MaxExperimentScheduleNameLength)
		})},
		"two templates": {
			s:    sched(withPipeline(nil), func(s *schemas.Schedule) { s.Spec.Action.JobTemplate = &schemas.JobTemplate{Spec: job().Obj().Spec} }),
			want: schemas.ErrorList{{Field: "spec.action", Detail: "must set exactly one of jobTemplate, pipelineTemplate"}},
		},
		"pipeline template ref": {s: sched(func(s *schemas.Schedule) {
			s.Spec.Action = schemas.ScheduleAction{PipelineTemplateRef: &schemas.SchedulePipelineTemplateRef{
				Name: "retrain", Params: map[string]string{"threshold": "0.9"}}}
		})},
		"pipeline template ref and a template": {
			s: sched(withPipeline(nil), func(s *schemas.Schedule) {
				s.Spec.Action.PipelineTemplateRef = &schemas.SchedulePipelineTemplateRef{Name: "retrain"}
			}),
			want: schemas.ErrorList{{Field: "spec.action", Detail: "must set exactly one of pipelineTemplate, pipelineTemplateRef"}},
		},
		"bad pipeline template ref": {
			s: sched(func(s *schemas.Schedule) {
				s.Spec.Action = schemas.ScheduleAction{PipelineTemplateRef: &schemas.SchedulePipelineTemplateRef{
					Name: "Re_train", Params: map[string]string{"1x": "a", "long": strings.Repeat("v", 4097)}}}
				s.Spec.RunOptions.ResumeFromPreviousCheckpoint = true
			}),
			want: schemas.ErrorList{
				{Field: "spec.action.pipelineTemplateRef.name", Detail: "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"},
				{Field: "spec.action.pipelineTemplateRef.params.1x", Detail: "must be a parameter name (letters, digits and _, not starting with a digit, at most 64 characters)"},
				{Field: "spec.action.pipelineTemplateRef.params.long", Detail: "must be at most 4096 characters"},
				{Field: "spec.runOptions.resumeFromPreviousCheckpoint",
					Detail: "applies to jobTemplate only: an experiment's or a pipeline's run does not resume from the previous run's checkpoint"},
			},
		},
		"name too long for experiment names": {
			s: sched(withExperiment(nil), func(s *schemas.Schedule) { s.Metadata.Name = strings.Repeat("n", 26) }),
			want: schemas.ErrorList{{Field: "metadata.name",
				Detail: "must be at most 25 characters for a Schedule of experiments: run names append '-' and 14 digits, and an experiment's name is at most 40 characters"}},
		},
		"experiment template problems carry their full path": {
			s: sched(withExperiment(func(t *schemas.ExperimentTemplate) {
				t.Metadata.Labels = map[string]string{schemas.LabelSchedule: "other"}
				t.Spec.MaxTrials = 0
				t.Spec.Objective.Direction = "up"
				t.Spec.TrialTemplate.Framework = "caffe"
			})),
			want: schemas.ErrorList{
				{Field: `spec.action.experimentTemplate.metadata.labels["opendlc.io/schedule"]`, Detail: "is set by the schedule"},
				{Field: "spec.action.experimentTemplate.spec.maxTrials", Detail: "must be >= 1"},
				{Field: "spec.action.experimentTemplate.spec.objective.direction", Detail: "must be one of minimize, maximize"},
				{Field: "spec.action.experimentTemplate.spec.trialTemplate.framework", Detail: frameworksMsg},
			},
		},
		"pipeline template problems carry their full path": {
			s: sched(withPipeline(func(t *schemas.PipelineTemplate) {
				t.Metadata.Annotations = map[string]string{"bad key!": "x"}
				t.Spec.Steps[4].DependsOn = append(t.Spec.Steps[4].DependsOn, "nothing")
				t.Spec.Steps[2].Job.Roles = map[string]schemas.RoleSpec{"worker": {Replicas: 0}}
			})),
			want: schemas.ErrorList{
				{Field: `spec.action.pipelineTemplate.metadata.annotations["bad key!"]`, Detail: labelKeyMsg},
				{Field: "spec.action.pipelineTemplate.spec.steps[2].job.roles.worker.replicas", Detail: "must be >= 1"},
				{Field: "spec.action.pipelineTemplate.spec.steps[4].dependsOn[1]", Detail: `unknown step "nothing"`},
			},
		},
		"pipeline step names too long for run names": {
			// 26 + '-' and 14 digits + '-' leave 8 characters: not enough for preprocess.
			s: sched(withPipeline(nil), func(s *schemas.Schedule) { s.Metadata.Name = strings.Repeat("n", 26) }),
			want: schemas.ErrorList{{Field: "spec.action.pipelineTemplate.spec.steps[0].name",
				Detail: "the step's job name <pipeline>-preprocess would be longer than 50 characters; shorten the pipeline's or the step's name"}},
		},
		"pipeline parameters": {
			s: sched(withPipeline(func(t *schemas.PipelineTemplate) {
				t.Spec.Params = append(t.Spec.Params, schemas.PipelineParam{Name: "threshold"})
				t.Params = map[string]string{"dataKey": "clicks/today", "thresold": "0.9"}
			})),
			want: schemas.ErrorList{
				{Field: "spec.action.pipelineTemplate.params.threshold", Detail: "required: the pipeline declares it without a default"},
				{Field: "spec.action.pipelineTemplate.params.thresold", Detail: "not a parameter of the pipeline"},
			},
		},
		"resume from the previous checkpoint is for jobs": {
			s: sched(withPipeline(nil), func(s *schemas.Schedule) { s.Spec.RunOptions.ResumeFromPreviousCheckpoint = true }),
			want: schemas.ErrorList{{Field: "spec.runOptions.resumeFromPreviousCheckpoint",
				Detail: "applies to jobTemplate only: an experiment's or a pipeline's run does not resume from the previous run's checkpoint"}},
		},
		"template problems carry their full path": {
			s: sched(func(s *schemas.Schedule) {
				jt := s.Spec.Action.JobTemplate
				jt.Spec.Framework = "caffe"
				jt.Spec.Roles = map[string]schemas.RoleSpec{"worker": {Replicas: 0}}
				jt.Metadata.Labels = map[string]string{schemas.LabelSchedule: "other", "bad key!": "x"}
			}),
			want: schemas.ErrorList{
				{Field: `spec.action.jobTemplate.metadata.labels["bad key!"]`, Detail: labelKeyMsg},
				{Field: `spec.action.jobTemplate.metadata.labels["opendlc.io/schedule"]`, Detail: "is set by the schedule"},
				{Field: "spec.action.jobTemplate.spec.framework", Detail: frameworksMsg},
				{Field: "spec.action.jobTemplate.spec.roles.worker.replicas", Detail: "must be >= 1"},
			},
		},
		"run options": {
			s: sched(func(s *schemas.Schedule) {
				s.Spec.RunOptions = schemas.ScheduleRunOptions{ResumeFromPreviousCheckpoint: true, SkipIfNoNewDataUnder: "/data/clicks"}
			}),
			want: schemas.ErrorList{
				{Field: "spec.runOptions.resumeFromPreviousCheckpoint", Detail: "needs action.jobTemplate.spec.checkpoint: the location the runs checkpoint to"},
				{Field: "spec.runOptions.skipIfNoNewDataUnder", Detail: "must be s3://bucket/prefix"},
			},
		},
		"data prefix with a bad bucket": {
			s: sched(func(s *schemas.Schedule) { s.Spec.RunOptions.SkipIfNoNewDataUnder = "s3://a/clicks" }),
			want: schemas.ErrorList{{Field: "spec.runOptions.skipIfNoNewDataUnder",
				Detail: `bucket name "a" must be 3-63 characters`}},
		},
		"wrong kind and version": {
			s: sched(func(s *schemas.Schedule) { s.Kind = schemas.KindTrainingJob; s.APIVersion = "v1" }),
			want: schemas.ErrorList{
				{Field: "apiVersion", Detail: "must be opendlc.io/v1alpha1"},
				{Field: "kind", Detail: "must be Schedule"},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			checkValidate(t, tt.s, tt.want)
		})
	}
}

// Decoding reports an invalid cron expression and an unknown zone, with their paths, as
// validation does; a malformed time is reported at decode time.
func TestDecodeSchedule(t *testing.T) {
	doc := func(spec string) []byte {
		return []byte(`apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: nightly}
spec:
` + spec + `
  action:
    jobTemplate:
      spec: {framework: custom, command: ["true"], roles: {worker: {replicas: 1}}}
`)
	}
	s, err := schemas.DecodeSchedule(doc(`  cron: "61 2 * * *"
  timeZone: Mars/Base`))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if diff := cmp.Diff([]string{"spec.cron", "spec.timeZone"}, s.Validate().Fields()); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}

	_, err = schemas.DecodeSchedule(doc(`  cron: "@daily"
  startTime: tomorrow
  paused: "yes"
  catchupWindow: 1 hour`))
	checkErrorList(t, "DecodeSchedule", err, schemas.ErrorList{
		{Field: "spec.catchupWindow", Detail: `invalid duration "1 hour": must look like "90s", "10m" or "72h"`},
		{Field: "spec.paused", Detail: "must be a boolean (true or false)"},
		{Field: "spec.startTime", Detail: "must be an RFC 3339 time such as 2026-01-02T15:04:05Z or 2026-01-02T02:00:00+08:00"},
	})

	var list schemas.ErrorList

	if _, err := schemas.DecodeSchedule([]byte(`{"apiVersion": "opendlc.io/v1alpha1", "kind": "TrainingJob"}`)); !errors.As(err, &list) || list[0].Field != "kind" {
		t.Errorf("wrong kind: %v", err)
	}
}

// The example in examples/schedule decodes through the generic Decode, validates, gets
// its defaults, and fires at 02:00 Shanghai time.
func TestScheduleExample(t *testing.T) {
	obj, err := schemas.Decode(readFile(t, "../examples/schedule/nightly.yaml"))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	s, ok := obj.(*schemas.Schedule)
	if !ok {
		t.Fatalf("Decode gave %T, want *schemas.Schedule", obj)
	}
	if diff := cmp.Diff(schemas.ErrorList(nil), s.Validate()); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
	if s.Spec.OverlapPolicy != schedule.Skip || s.Spec.HistoryLimit != 30 || s.Spec.CatchupWindow.D() != 12*time.Hour {
		t.Errorf("spec = %+v", s.Spec)
	}
	if jt := s.Spec.Action.JobTemplate; jt.Spec.Resources.Pool != schemas.PoolQuota || !jt.Spec.Logs.ForwardLogs() {
		t.Errorf("job template not defaulted: %+v", jt.Spec)
	}
	times, err := s.Times()
	if err != nil {
		t.Fatal(err)
	}
	next := times.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 2)
	want := []string{"2026-01-02T02:00:00+08:00", "2026-01-03T02:00:00+08:00"}
	if diff := cmp.Diff(want, []string{next[0].Format(time.RFC3339), next[1].Format(time.RFC3339)}); diff != "" {
		t.Errorf("next (-want +got):\n%s", diff)
	}
	if j := times.Jitter(next[0]); j < 0 || j >= 5*time.Minute {
		t.Errorf("jitter %s outside [0, 5m)", j)
	}
}

func TestScheduleDefault(t *testing.T) {
	s := sched(func(s *schemas.Schedule) {
		s.Metadata.Workspace = ""
		s.Spec.TimeZone = ""
		s.Spec.Action.JobTemplate.Spec.Resources.Pool = ""
		s.Spec.Action.JobTemplate.Spec.Logs.Forward = nil
	})
	s.Default()
	forward := true
	want := sched(func(w *schemas.Schedule) {
		w.Metadata.Workspace = schemas.DefaultWorkspace
		w.Spec.TimeZone = "UTC"
		w.Spec.OverlapPolicy = schedule.Skip
		w.Spec.CatchupWindow = schemas.Duration(time.Hour)
		w.Spec.HistoryLimit = 50
		w.Spec.Action.JobTemplate.Spec.Resources.Pool = schemas.PoolQuota
		w.Spec.Action.JobTemplate.Spec.Logs.Forward = &forward
	})
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("Default (-want +got):\n%s", diff)
	}
	var obj schemas.Object = s
	if obj.GetKind() != schemas.KindSchedule || obj.GetMeta() != &s.Metadata {
		t.Error("GetKind/GetMeta")
	}
}

// spec.checkpoint.resumeFrom names one checkpoint: s3://bucket/prefix/<step>.
func TestResumeFromValidation(t *testing.T) {
	tests := map[string]struct {
		ref  string
		want schemas.ErrorList
	}{
		"padded step":   {ref: "s3://ckpt/nightly/000000000120"},
		"short step":    {ref: "s3://ckpt/a/b/7"},
		"trailing /":    {ref: "s3://ckpt/nightly/000000000120/"},
		"no step":       {ref: "s3://ckpt/nightly", want: resumeErr()},
		"not a step":    {ref: "s3://ckpt/nightly/latest", want: resumeErr()},
		"not s3":        {ref: "/tmp/ckpt/000000000120", want: resumeErr()},
		"bucket only":   {ref: "s3://ckpt/000000000120", want: resumeErr()},
		"bad bucket":    {ref: "s3://C/x/000000000120", want: resumeErr()},
		"unset is fine": {ref: ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			j := job().Obj()
			j.Spec.Checkpoint = &schemas.CheckpointSpec{URI: "s3://ckpt/nightly", ResumeFrom: tt.ref}
			checkValidate(t, j, tt.want)
		})
	}
}

func resumeErr() schemas.ErrorList {
	return schemas.ErrorList{{Field: "spec.checkpoint.resumeFrom", Detail: "must be a checkpoint: s3://bucket/prefix/<step>, the step in digits"}}
}

// specErrors are the errors below prefix, with prefix (also where a message names
// another field) written as spec.
func specErrors(errs schemas.ErrorList, prefix string) []string {
	var out []string
	for _, e := range errs {
		if rest, ok := strings.CutPrefix(e.Field, prefix); ok {
			out = append(out, "spec"+rest+": "+strings.ReplaceAll(e.Detail, prefix, "spec"))
		}
	}
	return out
}

// A template is validated as a document of its kind: every problem an Experiment or a
// Pipeline with that spec has below spec, the schedule reports at the same path below
// spec.action.<kind>Template.spec, and no other.
func TestScheduleTemplatesValidateAsTheirKind(t *testing.T) {
	// sameErrors checks that the schedule reports below its template's path what the
	// document itself reports below spec, and that a mutation does make an error.
	sameErrors := func(t *testing.T, name, kind string, doc schemas.ErrorList, s *schemas.Schedule) {
		t.Helper()
		want := specErrors(doc, "spec")
		path := "spec.action." + strings.ToLower(kind[:1]) + kind[1:] + "Template.spec"
		if diff := cmp.Diff(want, specErrors(s.Validate(), path)); diff != "" {
			t.Errorf("schedule's template errors (-as the %s +as a Schedule's template):\n%s", kind, diff)
		}
		if name != "valid" && len(want) == 0 {
			t.Errorf("the mutation %q makes no error: the case tests nothing", name)
		}
	}
	experiments := map[string]func(e *schemas.Experiment){
		"valid":            func(*schemas.Experiment) {},
		"no search space":  func(e *schemas.Experiment) { e.Spec.SearchSpace = nil },
		"min above max":    expParam(0, func(p *schemas.ParameterSpec) { p.Min, p.Max = expF64(2), expF64(1) }),
		"unknown param":    func(e *schemas.Experiment) { e.Spec.TrialTemplate.Args = []string{"${params.momentum}"} },
		"grid of floats":   func(e *schemas.Experiment) { e.Spec.Algorithm.Name = schemas.AlgorithmGrid },
		"bad trial job":    func(e *schemas.Experiment) { e.Spec.TrialTemplate.Roles = nil },
		"metric is step":   func(e *schemas.Experiment) { e.Spec.Objective.StepMetric = "accuracy" },
		"too many retries": func(e *schemas.Experiment) { e.Spec.MaxTrialRetries = expI32(1000) },
	}
	for name, mutate := range experiments {
		t.Run("experiment/"+name, func(t *testing.T) {
			e := testExp(mutate)
			s := sched(func(s *schemas.Schedule) {
				s.Spec.Action = schemas.ScheduleAction{ExperimentTemplate: &schemas.ExperimentTemplate{Spec: e.Spec}}
			})
			sameErrors(t, name, "Experiment", e.Validate(), s)
		})
	}
	pipelines := map[string]func(p *schemas.Pipeline){
		"valid":               func(*schemas.Pipeline) {},
		"cycle":               func(p *schemas.Pipeline) { p.Spec.Steps[0].DependsOn = []string{"promote"} },
		"duplicate step":      func(p *schemas.Pipeline) { p.Spec.Steps[1].Name = "preprocess" },
		"unknown reference":   func(p *schemas.Pipeline) { p.Spec.Steps[2].Job.Command = []string{"${steps.nowhere.outputs.x}"} },
		"bad condition":       func(p *schemas.Pipeline) { p.Spec.Steps[3].Condition.Expression = "accuracy >" },
		"job and condition":   func(p *schemas.Pipeline) { p.Spec.Steps[3].Job = p.Spec.Steps[2].Job },
		"condition outputs":   func(p *schemas.Pipeline) { p.Spec.Steps[3].Outputs = map[string]string{"x": "s3://b/x"} },
		"duplicate parameter": func(p *schemas.Pipeline) { p.Spec.Params = append(p.Spec.Params, p.Spec.Params[0]) },
	}
	for name, mutate := range pipelines {
		t.Run("pipeline/"+name, func(t *testing.T) {
			p := decodePipeline(t, retrainPipeline)
			mutate(p)
			s := sched(func(s *schemas.Schedule) {
				s.Spec.Action = schemas.ScheduleAction{PipelineTemplate: &schemas.PipelineTemplate{Spec: p.Spec}}
			})
			sameErrors(t, name, "Pipeline", p.Validate(), s)
		})
	}
}

// A schedule of experiments and one of pipelines decode strictly, with field paths below
// their template, and get their template's defaults.
func TestDecodeScheduleTemplates(t *testing.T) {
	doc := func(action string) []byte {
		return []byte(`apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: nightly}
spec:
  cron: "@daily"
  action:
` + action)
	}
	obj, err := schemas.Decode(doc(`    experimentTemplate:
      spec:
        searchSpace: [{name: lr, type: float, min: 0.001, max: 0.1}]
        objective: {metric: accuracy, direction: maximize}
        maxTrials: 4
        trialTemplate: {framework: custom, command: [train, "${params.lr}"], roles: {worker: {replicas: 1}}}
`))
	if err != nil {
		t.Fatalf("decode experiment schedule: %v", err)
	}
	s := obj.(*schemas.Schedule)
	if errs := s.Validate(); errs != nil {
		t.Errorf("Validate = %v", errs)
	}
	if e := s.Spec.Action.ExperimentTemplate; e == nil || e.Spec.Parallelism != schemas.DefaultParallelism ||
		e.Spec.Algorithm.Name != schemas.DefaultAlgorithm {
		t.Errorf("experiment template not defaulted: %+v", e)
	}

	_, err = schemas.DecodeSchedule(doc(`    pipelineTemplate:
      params: {count: 3}
      spec:
        steps: [{name: a, job: {framework: custom, command: ["true"], roles: {worker: {replica: 1}}}}]
`))
	var list schemas.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("decode error = %v, want an ErrorList", err)
	}
	if diff := cmp.Diff([]string{
		"spec.action.pipelineTemplate.params.count",
		"spec.action.pipelineTemplate.spec.steps[0].job.roles.worker.replica",
	}, list.Fields()); diff != "" {
		t.Errorf("decode error fields (-want +got):\n%s\n%v", diff, list)
	}
}
