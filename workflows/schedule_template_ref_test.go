package workflows_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/workflows"
)

// fakeTemplates is a store of pipeline templates by workspace and name, changed by
// the test while the schedule runs.
type fakeTemplates struct {
	mu    sync.Mutex
	byKey map[string]*schemas.StoredPipelineTemplate
	reads []string // workspace/name of every read
}

func (f *fakeTemplates) put(t *schemas.StoredPipelineTemplate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byKey[t.Metadata.Workspace+"/"+t.Metadata.Name] = t
}

func (f *fakeTemplates) remove(ws, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byKey, ws+"/"+name)
}

func (f *fakeTemplates) GetPipelineTemplate(_ context.Context, ws, name string) (*schemas.StoredPipelineTemplate, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, ws+"/"+name)
	t, ok := f.byKey[ws+"/"+name]
	return t, ok, nil
}

// storedTemplate is template retrain of workspace ws whose step runs command.
func storedTemplate(ws string, command ...string) *schemas.StoredPipelineTemplate {
	key := "clicks/latest"
	return &schemas.StoredPipelineTemplate{APIVersion: schemas.APIVersion, Kind: schemas.KindPipelineTemplate,
		Metadata: schemas.ObjectMeta{Name: "retrain", Workspace: ws, Labels: map[string]string{"team": "ml"}},
		Spec: schemas.PipelineSpec{
			Params: []schemas.PipelineParam{{Name: "threshold"}, {Name: "dataKey", Default: &key}},
			Steps: []schemas.PipelineStep{{Name: "train", Job: &schemas.TrainingJobSpec{
				Framework: schemas.FrameworkCustom, Command: command,
				Roles: map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
			}}},
		}}
}

// A schedule that names a stored pipeline template runs, at each fire, the template
// as it is then, read in the schedule's own workspace by the ResolvePipelineTemplate
// activity (the real one, over a fake store): the 00:00 run runs v1, the 01:00 run the
// v2 applied at 00:30; after the template is deleted at 01:30 the 02:00 run is
// StartFailed, saying the template is missing, though another workspace has a template
// of that name; its run event says so too; and the schedule goes on (a trigger at
// 02:30 after the template is back starts a run).
func TestScheduleRunsAStoredPipelineTemplate(t *testing.T) {
	start := t0.Add(-30 * time.Minute)
	h := newSchedHarness(t, start)
	h.jobDuration = 10 * time.Minute
	store := &fakeTemplates{byKey: map[string]*schemas.StoredPipelineTemplate{}}
	store.put(storedTemplate("ml", "train", "v1"))
	store.put(storedTemplate("other", "steal", "data"))
	acts := &activities.ScheduleActivities{Templates: store}
	onActivity(h.env, scheduleActs.ResolvePipelineTemplate, acts.ResolvePipelineTemplate)

	sched := testSchedule(t, func(s *schemas.Schedule) {
		s.Spec.Action = schemas.ScheduleAction{PipelineTemplateRef: &schemas.SchedulePipelineTemplateRef{
			Name: "retrain", Params: map[string]string{"threshold": "0.9"}}}
	})
	h.at(start, t0.Add(30*time.Minute), func() { store.put(storedTemplate("ml", "train", "v2")) })
	h.at(start, t0.Add(90*time.Minute), func() { store.remove("ml", "retrain") })
	triggered := t0.Add(150 * time.Minute)
	h.at(start, t0.Add(140*time.Minute), func() { store.put(storedTemplate("ml", "train", "v3")) })
	h.at(start, triggered, func() {
		var res workflows.TriggerScheduleResult
		h.update(workflows.UpdateScheduleTrigger, workflows.TriggerScheduleRequest{}, &res)
	})
	h.run(workflows.ScheduleInput{Schedule: sched}, start, t0.Add(2*time.Hour+45*time.Minute))
	h.checkUpdates()

	wantCommands := map[string][]string{jobName(t0): {"train", "v1"}, jobName(t0.Add(time.Hour)): {"train", "v2"},
		jobName(triggered): {"train", "v3"}}
	if len(h.started) != len(wantCommands) {
		t.Fatalf("started %v, want the runs of 00:00, 01:00 and the trigger of 02:30", h.names())
	}
	for _, s := range h.started {
		p := s.Pipeline
		if p == nil {
			t.Fatalf("run %s started no pipeline", s.Name)
		}
		if got := p.Pipeline.Spec.Steps[0].Job.Command; !cmp.Equal(got, wantCommands[s.Name]) {
			t.Errorf("run %s ran %v, want %v (the template as it was at its fire)", s.Name, got, wantCommands[s.Name])
		}
		meta := p.Pipeline.Metadata
		if meta.Workspace != "ml" || meta.Labels["team"] != "ml" || meta.Labels[schemas.LabelSchedule] != "nightly" ||
			meta.Annotations[schemas.AnnotationPipelineTemplate] != "retrain" || meta.Annotations[schemas.AnnotationNominalTime] == "" {
			t.Errorf("run %s: metadata %+v", s.Name, meta)
		}
		if diff := cmp.Diff(map[string]string{"threshold": "0.9", "dataKey": "clicks/latest"}, p.Params); diff != "" {
			t.Errorf("run %s params (-want +got):\n%s", s.Name, diff)
		}
	}
	for _, r := range store.reads {
		if r != "ml/retrain" {
			t.Errorf("read template %s, want only the schedule's workspace's", r)
		}
	}

	st := h.lastView().Status
	var failed []schemas.ScheduleRun
	for _, r := range st.History {
		if r.Outcome == schemas.RunStartFailed {
			failed = append(failed, r)
		}
	}
	if len(failed) != 1 || !failed[0].NominalTime.Equal(t0.Add(2*time.Hour)) || failed[0].Kind != schemas.KindPipeline ||
		!strings.Contains(failed[0].Message, `pipeline template "retrain" not found in workspace ml`) {
		t.Fatalf("StartFailed runs %+v, want the 02:00 run, saying the template is missing", failed)
	}
	var evFailed int
	for _, d := range h.runEvents(1) {
		if d.Action == "StartFailed" {
			evFailed++
			if d.Outcome != string(schemas.RunStartFailed) || !strings.Contains(d.Message, `pipeline template "retrain" not found`) {
				t.Errorf("StartFailed event %+v, want the missing template's message", d)
			}
		}
	}
	if evFailed != 1 {
		t.Errorf("%d StartFailed run events, want 1", evFailed)
	}
}

// A template that does not take the schedule's params, or whose run would be invalid,
// makes the run StartFailed with the fields named; the activity checks, the workflow
// records.
func TestResolvePipelineTemplateProblems(t *testing.T) {
	store := &fakeTemplates{byKey: map[string]*schemas.StoredPipelineTemplate{}}
	store.put(storedTemplate("ml", "train"))
	acts := &activities.ScheduleActivities{Templates: store}
	ctx := context.Background()
	in := activities.ResolvePipelineTemplateInput{Workspace: "ml", Template: "retrain", Run: "nightly-20260601000000",
		Params: map[string]string{"threshold": "1", "thresold": "2"}}
	res, err := acts.ResolvePipelineTemplate(ctx, in)
	if err != nil || !strings.Contains(res.Problem, "params.thresold: not a parameter of the pipeline") {
		t.Errorf("unknown param: %+v, %v", res, err)
	}
	in.Params = nil
	res, err = acts.ResolvePipelineTemplate(ctx, in)
	if err != nil || !strings.Contains(res.Problem, "params.threshold: required") {
		t.Errorf("missing param: %+v, %v", res, err)
	}
	in.Workspace = "other"
	in.Params = map[string]string{"threshold": "1"}
	res, err = acts.ResolvePipelineTemplate(ctx, in)
	if err != nil || res.Problem != `pipeline template "retrain" not found in workspace other` {
		t.Errorf("another workspace's template: %+v, %v", res, err)
	}
	// A template whose run would write outside the schedule's workspace's storage.
	outside := storedTemplate("ml", "train")
	outside.Spec.Steps[0].Job.Checkpoint = &schemas.CheckpointSpec{URI: "s3://dlc/workspaces/other/ckpt"}
	store.put(outside)
	acts.Storage = mlStorage{}
	in.Workspace = "ml"
	res, err = acts.ResolvePipelineTemplate(ctx, in)
	if err != nil || !strings.Contains(res.Problem, `pipeline template "retrain" names storage outside workspace ml`) ||
		!strings.Contains(res.Problem, "checkpoint.uri") {
		t.Errorf("storage of another workspace: %+v, %v", res, err)
	}
	store.put(storedTemplate("ml", "train"))
	if res, err = acts.ResolvePipelineTemplate(ctx, in); err != nil || res.Problem != "" || res.Pipeline.Metadata.Name != in.Run {
		t.Errorf("a template inside the workspace's storage: %+v, %v", res, err)
	}
	if _, err := (&activities.ScheduleActivities{}).ResolvePipelineTemplate(ctx, in); err == nil {
		t.Error("a worker without templates resolved one")
	}
}

// mlStorage confines workspace ml to s3://dlc/workspaces/ml/.
type mlStorage struct{}

func (mlStorage) Locations(_ context.Context, ws string) ([]storage.Location, error) {
	l, err := storage.DefaultLocation("s3://dlc/workspaces", ws)
	return []storage.Location{l}, err
}
