package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/triggers"
	"github.com/opendlc/opendlc/workflows"
)

// s3Workspace is the workspace the stack's S3 gateway publishes bucket notifications to
// (embedded.Config.S3EventsWorkspace in TestMain).
const s3Workspace = "s3-events"

// retrainTriggerDoc starts preprocess → train (the example trainer, checkpointing to S3)
// → evaluate → better (a condition) → promote for every com.example.data.ready event
// on dlc.<ws>.trigger.retrain.
func retrainTriggerDoc(ws string) string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: retrain, workspace: %[1]s}
spec:
  subject: dlc.%[1]s.trigger.retrain
  filter: [{field: type, equals: com.example.data.ready}]
  params:
    dataKey: "${event.data.key}"
    currentAccuracy: "${event.data.currentAccuracy}"
  action:
    pipeline:
      params: [{name: dataKey}, {name: currentAccuracy}]
      steps:
        - name: preprocess
          job:
            framework: custom
            command: [sh, -c, 'echo "preprocessing $DATA_KEY"']
            env: [{name: DATA_KEY, value: "${params.dataKey}"}]
            roles: {worker: {replicas: 1}}
        - name: train
          dependsOn: [preprocess]
          job:
            framework: pytorch
            command: [%[2]q]
            args: [--epochs, "3", --lr, "0.2"]
            roles: {worker: {replicas: 1}}
            checkpoint: {uri: "s3://dlc/%[1]s/${pipeline.name}/model"}
        - name: evaluate
          dependsOn: [train]
          job:
            framework: custom
            command: [sh, -c, 'echo "evaluating $MODEL"; echo "dlc:metric accuracy=$ACC"']
            env:
              - {name: MODEL, value: "${steps.train.outputs.checkpoint}"}
              - {name: ACC, value: "${steps.train.metrics.accuracy}"}
            roles: {worker: {replicas: 1}}
        - name: better
          dependsOn: [evaluate]
          condition: {expression: "steps.evaluate.metrics.accuracy > params.currentAccuracy"}
        - name: promote
          dependsOn: [better]
          job:
            framework: custom
            command: [sh, -c, 'echo "promoting $MODEL"']
            env: [{name: MODEL, value: "${steps.train.outputs.checkpoint}"}]
            roles: {worker: {replicas: 1}}
`, ws, env.trainer)
}

func dataReady(id, key string, current float64) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"/etl/clicks","type":"com.example.data.ready",
"datacontenttype":"application/json","data":{"key":%q,"currentAccuracy":%g}}`, id, key, current)
}

// waitPipeline waits for a pipeline run to exist and end.
func waitPipeline(t *testing.T, ctx context.Context, ws, name string) *api.PipelineRun {
	t.Helper()
	var p *api.PipelineRun
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("pipeline %s/%s to be started and end", ws, name), func() error {
		var err error
		if p, err = env.api.WaitPipeline(ctx, ws, name, 200*time.Millisecond, nil); err != nil && !dlc.IsNotFound(err) {
			t.Fatalf("pipeline %s/%s: %v", ws, name, err)
		}
		return err
	}, itest.PollInterval)
	return p
}

// inboundDrained waits until the trigger dispatcher has acknowledged every inbound
// message stored up to now.
func inboundDrained(t *testing.T, ctx context.Context) {
	t.Helper()
	js := env.events.JetStream()
	s, err := js.Stream(ctx, triggers.InboundStream)
	if err != nil {
		t.Fatal(err)
	}
	last := s.CachedInfo().State.LastSeq
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("the trigger dispatcher to acknowledge inbound message %d", last), func() error {
		c, err := js.Consumer(ctx, triggers.InboundStream, triggers.DefaultConsumer)
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream < last {
			return fmt.Errorf("acknowledged up to %d", info.AckFloor.Stream)
		}
		return nil
	}, 50*time.Millisecond)
}

func logLines(t *testing.T, ctx context.Context, ws, job string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range jobLogs(t, ctx, ws, job) {
		b.WriteString(r.Line)
		b.WriteByte('\n')
	}
	return b.String()
}

// An event published twice with the same id starts exactly one pipeline run, whose
// steps run one after the other and pass their outputs on: train's checkpoint reaches
// evaluate's environment, evaluate's metric reaches the condition, and promote is
// skipped because the model is worse than the current one. A second event, whose
// current accuracy is lower, starts a second run in which promote runs.
func TestTriggerStartsPipelineOncePerEvent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	tr, err := env.api.ApplyTrigger(ctx, []byte(retrainTriggerDoc(ws)))
	if err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	if l, err := env.api.ListTriggers(ctx, ws); err != nil || len(l.Items) != 1 || l.Items[0].Metadata.Name != "retrain" {
		t.Fatalf("list triggers: %+v, %v", l, err)
	}
	subject := tr.Spec.Subject
	js := env.events.JetStream()
	worse := dataReady("clicks-2026-12-01", "clicks/2026-12-01.csv", 0.9999)
	for range 2 { // the same event twice: a repeat delivery
		if _, err := js.Publish(ctx, subject, worse); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, subject, dataReady("clicks-2026-12-02", "clicks/2026-12-02.csv", 0.01)); err != nil {
		t.Fatal(err)
	}
	runWorse := schemas.TriggerRunName("retrain", "/etl/clicks clicks-2026-12-01")
	runBetter := schemas.TriggerRunName("retrain", "/etl/clicks clicks-2026-12-02")

	p := waitPipeline(t, ctx, ws, runWorse)
	inboundDrained(t, ctx)
	st := p.Status
	if st.Phase != schemas.PipelineSucceeded {
		t.Fatalf("run %s: %s (%s); steps %s", runWorse, st.Phase, st.Message, stepsOf(st))
	}
	if diff := cmp.Diff([]string{"preprocess:Succeeded", "train:Succeeded", "evaluate:Succeeded", "better:Succeeded", "promote:Skipped"}, stepsOf(st)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"currentAccuracy=0.9999", "dataKey=clicks/2026-12-01.csv"}, paramsOf(st)); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}

	// The steps ran in order: each job started after the one before it had finished.
	var prev *api.Job
	for _, step := range []string{"preprocess", "train", "evaluate"} {
		j, err := env.api.GetJob(ctx, ws, st.Step(step).Job)
		if err != nil {
			t.Fatalf("job of step %s: %v", step, err)
		}
		if j.Spec.Metadata.Labels[schemas.LabelPipeline] != runWorse {
			t.Errorf("job %s labels %v", j.Spec.Metadata.Name, j.Spec.Metadata.Labels)
		}
		if prev != nil && j.Status.StartTime.Before(*prev.Status.FinishTime) {
			t.Errorf("%s started at %s, before %s finished at %s", j.Spec.Metadata.Name, j.Status.StartTime,
				prev.Spec.Metadata.Name, prev.Status.FinishTime)
		}
		prev = j
	}

	// train's newest checkpoint reached evaluate; evaluate's metric reached the condition.
	ckpt := st.Step("train").Outputs[schemas.OutputCheckpoint]
	if !strings.HasPrefix(ckpt, fmt.Sprintf("s3://dlc/%s/%s/model/", ws, runWorse)) {
		t.Fatalf("train's checkpoint output = %q", ckpt)
	}
	if latest, err := env.store.Latest(ctx, st.Step("train").Outputs[schemas.OutputCheckpointURI]); err != nil || latest.Ref != ckpt {
		t.Errorf("S3's newest checkpoint %v (err %v), train's output %s", latest, err, ckpt)
	}
	if logs := logLines(t, ctx, ws, st.Step("evaluate").Job); !strings.Contains(logs, "evaluating "+ckpt+"\n") {
		t.Errorf("evaluate's logs do not name train's checkpoint %s:\n%s", ckpt, logs)
	}
	acc, ok := st.Step("evaluate").Metrics["accuracy"]
	if !ok || acc <= 0 || acc != st.Step("train").Metrics["accuracy"] {
		t.Errorf("evaluate's accuracy %v (reported: %v), train's %v", acc, ok, st.Step("train").Metrics["accuracy"])
	}
	better := st.Step("better")
	if better.ConditionResult == nil || *better.ConditionResult ||
		!strings.Contains(better.Message, fmt.Sprintf("steps.evaluate.metrics.accuracy (%g) > params.currentAccuracy (0.9999) is false", acc)) {
		t.Errorf("condition: %v %q", better.ConditionResult, better.Message)
	}
	if promote := st.Step("promote"); promote.Reason != "ConditionFalse" || promote.StartTime != nil {
		t.Errorf("promote: %s %s, started %v", promote.Phase, promote.Reason, promote.StartTime)
	}

	recordHistory(t, ctx, workflows.PipelineWorkflowID(ws, runWorse), "pipeline_condition_false.json")

	// The second event's run promotes.
	p2 := waitPipeline(t, ctx, ws, runBetter)
	recordHistory(t, ctx, workflows.PipelineWorkflowID(ws, runBetter), "pipeline_promoted.json")
	if p2.Status.Phase != schemas.PipelineSucceeded || p2.Status.Step("promote").Phase != schemas.StepSucceeded {
		t.Fatalf("run %s: %s (%s); steps %s", runBetter, p2.Status.Phase, p2.Status.Message, stepsOf(p2.Status))
	}
	ckpt2 := p2.Status.Step("train").Outputs[schemas.OutputCheckpoint]
	if logs := logLines(t, ctx, ws, p2.Status.Step("promote").Job); ckpt2 == "" || !strings.Contains(logs, "promoting "+ckpt2+"\n") {
		t.Errorf("promote's logs do not name train's checkpoint %q:\n%s", ckpt2, logs)
	}

	// Three deliveries, two runs: the repeat started nothing. Nothing else started
	// either: the workspace has the two runs' jobs only (4 + 5).
	runs, err := env.api.ListPipelines(ctx, ws, dlc.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs.Items {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	want := []string{runWorse, runBetter}
	slices.Sort(want)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("pipeline runs (-want +got):\n%s", diff)
	}
	if jobs, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{}); err != nil || len(jobs.Items) != 7 {
		t.Errorf("jobs in the workspace: %d (err %v), want 7 (3 + 4)", len(jobs.Items), err)
	}
	if n := countInbound(t, ctx, subject); n != 3 {
		t.Errorf("%d inbound messages on %s, want 3", n, subject)
	}
	_, fired := streamEvents[events.TriggerFiredData](t, ctx, env.events, events.TriggerFiredSubject(ws, "retrain"))
	if len(fired) != 2 || fired[0].StartedKind != string(schemas.KindPipeline) {
		t.Errorf("fired events: %+v, want 2 pipeline starts", fired)
	}
	if err := env.api.DeleteTrigger(ctx, ws, "retrain"); err != nil {
		t.Errorf("delete trigger: %v", err)
	}
}

// An object uploaded to S3 under clicks/ starts a retraining run through the S3
// gateway's bucket notification (versitygw → NATS → DLC_INBOUND → trigger), with the
// object's URI as a parameter; an object elsewhere starts nothing.
func TestTriggerS3UploadStartsRetraining(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := s3Workspace
	const bucket = "trigger-datasets"
	if err := env.e.Stack.S3.CreateBuckets(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	// The bucket is no workspace's location: its notifications are routed to the
	// fallback workspace, s3Workspace.
	subject := schemas.S3EventSubject(ws)
	if env.e.Stack.S3.EventSubject != schemas.S3RawEventSubject {
		t.Fatalf("the S3 gateway publishes to %q, want %q", env.e.Stack.S3.EventSubject, schemas.S3RawEventSubject)
	}
	_, err := env.api.ApplyTrigger(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-new-data, workspace: %s}
spec:
  subject: %s
  filter:
    - {field: "data.Records[0].eventName", prefix: "s3:ObjectCreated:"}
    - {field: "data.Records[0].s3.bucket.name", equals: %s}
    - {field: "data.Records[0].s3.object.key", prefix: clicks/}
  params:
    data: "s3://${event.data.Records[0].s3.bucket.name}/${event.data.Records[0].s3.object.key}"
  action:
    pipeline:
      params: [{name: data}]
      steps:
        - name: retrain
          job:
            framework: custom
            command: [sh, -c, 'echo "retraining on $DATA"; echo "dlc:metric accuracy=0.9"']
            env: [{name: DATA, value: "${params.data}"}]
            roles: {worker: {replicas: 1}}
`, ws, subject, bucket))
	if err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	s3c := env.e.Stack.S3.Client()
	for _, key := range []string{"views/2026-12-01.csv", "clicks/2026-12-01.csv"} {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("user,item\n1,2\n")),
		}); err != nil {
			t.Fatalf("upload %s: %v", key, err)
		}
	}

	// The run is named after the notification, which only the gateway knows: find it by
	// the trigger's label.
	var run string
	testutil.Eventually(t, itest.Left(ctx), "a pipeline run started by the upload", func() error {
		l, err := env.api.ListPipelines(ctx, ws, dlc.ListOptions{Labels: []string{schemas.LabelTrigger + "=on-new-data"}})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return errors.New("none listed")
		}
		run = l.Items[0].Name
		return nil
	}, itest.PollInterval)
	p := waitPipeline(t, ctx, ws, run)
	if p.Status.Phase != schemas.PipelineSucceeded {
		t.Fatalf("run %s: %s (%s)", run, p.Status.Phase, p.Status.Message)
	}
	want := "s3://" + bucket + "/clicks/2026-12-01.csv"
	if p.Status.Params["data"] != want {
		t.Errorf("params = %v, want data=%s", p.Status.Params, want)
	}
	if logs := logLines(t, ctx, ws, p.Status.Step("retrain").Job); !strings.Contains(logs, "retraining on "+want+"\n") {
		t.Errorf("the retraining job's logs do not name the new object:\n%s", logs)
	}

	// Once both notifications are in and handled, there is still one run.
	testutil.Eventually(t, itest.Left(ctx), "the gateway's notification of views/2026-12-01.csv", func() bool {
		return inboundHas(t, ctx, subject, "views/2026-12-01.csv")
	}, itest.PollInterval)
	inboundDrained(t, ctx)
	l, err := env.api.ListPipelines(ctx, ws, dlc.ListOptions{Labels: []string{schemas.LabelTrigger + "=on-new-data"}})
	if err != nil || len(l.Items) != 1 {
		t.Errorf("runs started by the trigger: %+v (err %v), want 1", l, err)
	}
	if err := env.api.DeleteTrigger(ctx, ws, "on-new-data"); err != nil {
		t.Errorf("delete trigger: %v", err)
	}
}

// countInbound counts the messages stored in DLC_INBOUND on subject.
func countInbound(t *testing.T, ctx context.Context, subject string) int {
	t.Helper()
	n := 0
	readInbound(t, ctx, subject, func([]byte) { n++ })
	return n
}

// inboundHas reports whether an inbound message on subject mentions s.
func inboundHas(t *testing.T, ctx context.Context, subject, s string) bool {
	t.Helper()
	found := false
	readInbound(t, ctx, subject, func(data []byte) { found = found || bytes.Contains(data, []byte(s)) })
	return found
}

func readInbound(t *testing.T, ctx context.Context, subject string, fn func([]byte)) {
	t.Helper()
	err := env.events.ReadUntil(ctx, triggers.InboundStream, subject, nil, func(_ string, data []byte) error {
		fn(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func stepsOf(st schemas.PipelineStatus) []string {
	out := make([]string, len(st.Steps))
	for i, s := range st.Steps {
		out[i] = s.Name + ":" + string(s.Phase)
	}
	return out
}

func paramsOf(st schemas.PipelineStatus) []string {
	var out []string
	for k, v := range st.Params {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// A pipeline submitted through the API runs with the parameters given; stopping it stops
// the running job (Cancelled) and skips the rest. An invalid pipeline is refused with
// field paths, a second run of the same name with a conflict.
func TestPipelineRunAndStopThroughAPI(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	c := env.api
	doc := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: long, workspace: %s}
spec:
  params: [{name: seconds, default: "1"}]
  steps:
    - name: first
      job: {framework: custom, command: [sh, -c, 'echo first'], roles: {worker: {replicas: 1}}}
    - name: slow
      dependsOn: [first]
      job: {framework: custom, command: [sh, -c, 'sleep ${params.seconds}'], roles: {worker: {replicas: 1}}}
    - name: after
      dependsOn: [slow]
      job: {framework: custom, command: [sh, -c, 'echo never'], roles: {worker: {replicas: 1}}}
`, ws)

	cyclic := strings.Replace(doc, "dependsOn: [first]", "dependsOn: [first, after]", 1)
	_, err := c.RunPipeline(ctx, []byte(cyclic), nil)
	var apiErr *dlc.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 422 || len(apiErr.API.Details) != 1 ||
		apiErr.API.Details[0].Field != "spec.steps[2].dependsOn" || apiErr.API.Details[0].Detail != "cycle slow → after → slow" {
		t.Fatalf("a cyclic pipeline: %v, want 422 on spec.steps[2].dependsOn", err)
	}
	if _, err := c.RunPipeline(ctx, []byte(doc), map[string]string{"nope": "1"}); !errors.As(err, &apiErr) ||
		apiErr.Status != 422 || apiErr.API.Details[0].Field != "params.nope" {
		t.Fatalf("an unknown parameter: %v, want 422 on params.nope", err)
	}

	run, err := c.RunPipeline(ctx, []byte(doc), map[string]string{"seconds": "300"})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if run.Status.Params["seconds"] != "300" {
		t.Errorf("params = %v", run.Status.Params)
	}
	if _, err := c.RunPipeline(ctx, []byte(doc), nil); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("a second run named long: %v, want 409", err)
	}
	waitFor(t, ctx, ws, "long-slow", "running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	res, err := c.StopPipeline(ctx, ws, "long", "not needed")
	if err != nil || res.Phase != schemas.PipelineStopped {
		t.Fatalf("stop: %+v, %v; want Stopped", res, err)
	}
	p, err := c.GetPipeline(ctx, ws, "long")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"first:Succeeded", "slow:Cancelled", "after:Skipped"}, stepsOf(p.Status)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if j, err := c.GetJob(ctx, ws, "long-slow"); err != nil || j.Status.Phase != schemas.JobStopped {
		t.Errorf("the slow step's job: %v, %v; want Stopped", j, err)
	}
	if _, err := c.GetJob(ctx, ws, "long-after"); !dlc.IsNotFound(err) {
		t.Errorf("the skipped step's job: %v, want none", err)
	}
	if res, err := c.StopPipeline(ctx, ws, "long", ""); err != nil || res.Phase != schemas.PipelineStopped {
		t.Errorf("stopping again: %+v, %v; want Stopped", res, err)
	}
	if _, err := c.GetPipeline(ctx, ws, "nope"); !dlc.IsNotFound(err) {
		t.Errorf("an unknown pipeline: %v, want 404", err)
	}
}

// The CLI end to end against the shared stack: apply, list, get and delete a trigger;
// run a pipeline with a parameter and --wait, then get and list it.
func TestPipelineAndTriggerCLI(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	bin := dlcBinary(t)
	dir := t.TempDir()
	dlcCmd := itest.CLI{Bin: bin, Server: env.e.APIURL, Token: env.e.AdminToken, Workspace: ws}.Runner(ctx)
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	trigger := write("trigger.yaml", fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: on-demand, workspace: %[1]s}
spec:
  subject: dlc.%[1]s.trigger.retrain
  params: {lr: "${event.data.lr}"}
  action:
    job: {framework: custom, command: [sh, -c, 'echo ${params.lr}'], roles: {worker: {replicas: 1}}}
`, ws))
	pipeline := write("pipeline.yaml", fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: tiny, workspace: %s}
spec:
  params: [{name: greeting}]
  steps:
    - name: hello
      job:
        framework: custom
        command: [sh, -c, 'echo "$GREETING"; echo "dlc:metric score=2"']
        env: [{name: GREETING, value: "${params.greeting}"}]
        roles: {worker: {replicas: 1}}
    - name: good
      dependsOn: [hello]
      condition: {expression: "steps.hello.metrics.score >= 2"}
`, ws))

	steps := []struct {
		args []string
		want string
	}{
		{[]string{"trigger", "apply", "-f", trigger}, "trigger " + ws + "/on-demand applied: listening on dlc." + ws + ".trigger.retrain"},
		{[]string{"trigger", "list"}, "on-demand"},
		{[]string{"trigger", "get", "on-demand"}, "subject: dlc." + ws + ".trigger.retrain"},
		{[]string{"pipeline", "run", "-f", pipeline, "-p", "greeting=hello, world", "--wait"}, "pipeline " + ws + "/tiny started"},
		{[]string{"pipeline", "get", "tiny"}, "metrics.score: 2"},
		{[]string{"pipeline", "list"}, "tiny"},
		{[]string{"trigger", "delete", "on-demand"}, "trigger on-demand deleted"},
	}
	for _, s := range steps {
		out, err := dlcCmd(s.args...)
		if err != nil || !strings.Contains(out, s.want) {
			t.Fatalf("dlc %s: %v\n%s\nwant output containing %q", strings.Join(s.args, " "), err, out, s.want)
		}
	}
	out, err := dlcCmd("pipeline", "get", "tiny", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var p api.PipelineRun
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("pipeline get -o json: %v\n%s", err, out)
	}
	if p.Status.Phase != schemas.PipelineSucceeded || p.Status.Params["greeting"] != "hello, world" ||
		p.Status.Step("good").ConditionResult == nil || !*p.Status.Step("good").ConditionResult {
		t.Errorf("run: %+v", p.Status)
	}
	if out, err := dlcCmd("trigger", "get", "on-demand"); err == nil || !strings.Contains(out, "not found") {
		t.Errorf("trigger get after delete: %v\n%s", err, out)
	}
}
