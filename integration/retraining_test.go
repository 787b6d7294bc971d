package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// retrainingDoc is examples/retraining/<file> for workspace ws of a test stack: the
// example trainer is the package's build, python3 Debian's (with boto3), and the
// example's program and the opendlc package are named by absolute paths (a job runs in
// the stack's work directory, not the repository). edits replace more.
func retrainingDoc(t *testing.T, file, ws string, edits ...[2]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(itest.Root(), "examples", "retraining", file))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, r := range append([][2]string{
		{"workspace: default", "workspace: " + ws},
		{"s3://dlc/workspaces/default/", "s3://dlc/workspaces/" + ws + "/"},
		{"command: [go, run, ./examples/trainer]", fmt.Sprintf("command: [%q]", env.trainer)},
		{"examples/retraining/model_record.py", filepath.Join(itest.Root(), "examples", "retraining", "model_record.py")},
		{"{name: PYTHONPATH, value: python}", fmt.Sprintf("{name: PYTHONPATH, value: %q}", filepath.Join(itest.Root(), "python"))},
		{"python3", "/usr/bin/python3"},
	}, edits...) {
		doc = strings.ReplaceAll(doc, r[0], r[1])
	}
	return doc
}

// logsOf is a job's log, one line per record, read through c.
func logsOf(t *testing.T, ctx context.Context, c *dlc.Client, ws, job string) string {
	t.Helper()
	var b strings.Builder
	if err := c.Logs(ctx, ws, job, dlc.LogOptions{}, func(r events.LogRecord) error {
		b.WriteString(r.Line)
		b.WriteByte('\n')
		return nil
	}); err != nil {
		t.Fatalf("logs of %s: %v", job, err)
	}
	return b.String()
}

// productionRecord is the retraining example's production record, or nil.
func productionRecord(t *testing.T, ctx context.Context, e *embedded.Embedded, uri string) map[string]any {
	t.Helper()
	client, bucket, key := itest.RawS3(t, e, uri)
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil
	}
	defer out.Body.Close()
	data, _ := io.ReadAll(out.Body)
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("production record %s: %v", data, err)
	}
	return rec
}

// The retraining loop of examples/retraining end to end on the real stack (Temporal,
// NATS JetStream, S3, a `dlc worker` process running real training programs):
//   - the nightly schedule fires the stored retrain template; while its tune step's
//     experiment runs, the worker is SIGKILLed and a new one started; the run succeeds:
//     a new shard was written to S3, the tuned parameters trained a model resumed from
//     the best trial's checkpoint, it beat the empty production record and was promoted
//     (the record in S3 names it); the promote job's success started the deploy job
//     (a trigger on OpenDLC's own events); the chat webhook got a Slack-format message
//     and the SMTP server an e-mail about the promotion;
//   - ten signed deliveries of the data platform's webhook within the debounce window,
//     the worker SIGKILLed after the fifth and another started, start one run, which
//     sees all ten; it promotes only if it beats the model now in production, and the
//     record and the deploy jobs say so.
func TestRetrainingLoopEndToEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	e := itest.StartStack(t, ctx, embedded.Config{Dir: filepath.Join(dir, "stack"), NoWorker: true, WorkDir: env.dir,
		WebhookAllow: []string{"127.0.0.1"}})
	stateDir := filepath.Join(dir, "local")
	first := startWorker(t, e, stateDir)
	c := itest.AdminClient(t, e)
	const ws, secret = "retraining", "data-platform-secret-0123456789"
	record := "s3://dlc/workspaces/" + ws + "/models/production.json"
	chat := newHookServer(t, 200, "ok")
	mail := newMailSink(t)

	if _, err := c.ApplyPipelineTemplate(ctx, []byte(retrainingDoc(t, "template.yaml", ws))); err != nil {
		t.Fatalf("template: %v", err)
	}
	if _, err := c.ApplyRule(ctx, []byte(retrainingDoc(t, "notify-chat.yaml", ws,
		[2]string{"https://hooks.slack.example.com/services/T000/B000/XXXX", chat.srv.URL + "/hook"}))); err != nil {
		t.Fatalf("chat rule: %v", err)
	}
	if _, err := c.ApplyRule(ctx, []byte(retrainingDoc(t, "notify-mail.yaml", ws,
		[2]string{"smtp: {host: smtp.example.com, port: 587}", fmt.Sprintf("smtp: {host: 127.0.0.1, port: %d, tls: none}", mail.port)}))); err != nil {
		t.Fatalf("mail rule: %v", err)
	}
	if _, err := c.ApplyTrigger(ctx, []byte(retrainingDoc(t, "deploy.yaml", ws))); err != nil {
		t.Fatalf("deploy trigger: %v", err)
	}
	if _, err := c.ApplyTrigger(ctx, []byte(retrainingDoc(t, "data-platform.yaml", ws,
		[2]string{"replace-with-a-secret-of-16-or-more-characters", secret}, [2]string{"debounce: 1m", "debounce: 20s"}))); err != nil {
		t.Fatalf("data platform trigger: %v", err)
	}
	if _, err := c.CreateSchedule(ctx, []byte(retrainingDoc(t, "schedule.yaml", ws))); err != nil {
		t.Fatalf("schedule: %v", err)
	}

	// 1. The nightly run, with the worker killed while it tunes.
	fired, err := c.TriggerSchedule(ctx, ws, "nightly-retrain", "")
	if err != nil {
		t.Fatal(err)
	}
	run1 := fired.Run.Job
	if run1 == "" || fired.Run.Kind != schemas.KindPipeline {
		t.Fatalf("the schedule's fire started %+v, want a pipeline run", fired.Run)
	}
	testutil.Eventually(t, itest.Left(ctx), "run "+run1+"'s tune step to run a trial", func() bool {
		p, err := c.GetPipeline(ctx, ws, run1)
		if err != nil || p.Status.Step("tune") == nil || p.Status.Step("tune").Phase != schemas.StepRunning {
			return false
		}
		ex, err := c.GetExperiment(ctx, ws, run1+"-tune")
		return err == nil && ex.Status.Running > 0
	}, 100*time.Millisecond)
	first.kill()
	if first.cmd.ProcessState == nil || first.cmd.ProcessState.Success() {
		t.Fatalf("the worker was not killed: %v", first.cmd.ProcessState)
	}
	second := startWorker(t, e, stateDir)
	p1 := waitRetrain(t, ctx, c, ws, run1)
	acc1 := stepMetric(t, p1, "evaluate", "accuracy")
	for _, step := range []string{"prepare", "current", "tune", "train", "evaluate", "promote", "summary"} {
		if s := p1.Status.Step(step); s == nil || s.Phase != schemas.StepSucceeded {
			t.Fatalf("run %s step %s: %+v, want Succeeded", run1, step, s)
		}
	}
	if s := p1.Status.Step("better"); s == nil || s.ConditionResult == nil || !*s.ConditionResult {
		t.Fatalf("run %s: better %+v, want true against an empty production record", run1, s)
	}
	// The data, the tuned and resumed training, the promotion.
	shard := p1.Status.Step("prepare").Outputs["data"]
	s3c, bucket, key := itest.RawS3(t, e, shard)
	if _, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		t.Fatalf("prepare's shard %s: %v", shard, err)
	}
	tune, train := p1.Status.Step("tune"), p1.Status.Step("train")
	trainJob, err := c.GetJob(ctx, ws, train.Job)
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(trainJob.Spec.Spec.Args, " "); !strings.Contains(args, "--lr "+tune.Outputs["bestParams.lr"]) {
		t.Errorf("train ran with %q, want the tuned --lr %s", args, tune.Outputs["bestParams.lr"])
	}
	if got := trainJob.Spec.Spec.Checkpoint.ResumeFrom; got == "" || got != tune.Outputs["checkpoint"] {
		t.Errorf("train resumed from %q, want the best trial's checkpoint %q", got, tune.Outputs["checkpoint"])
	}
	if rec := productionRecord(t, ctx, e, record); rec == nil || rec["run"] != run1 || rec["accuracy"] != acc1 {
		t.Fatalf("production record %v, want run %s with accuracy %v", rec, run1, acc1)
	}
	promote1 := p1.Status.Step("promote").Job
	deploys := waitDeploys(t, ctx, c, ws, 1)
	if logs := logsOf(t, ctx, c, ws, deploys[0].Name); !strings.Contains(logs, "deploying the model that "+promote1+" promoted") {
		t.Errorf("the deploy job's log does not name %s:\n%s", promote1, logs)
	}
	testutil.Eventually(t, itest.Left(ctx), "a chat message and an e-mail about "+promote1, func() bool {
		chatOK := false
		for _, r := range chat.requests() {
			var body map[string]any
			if json.Unmarshal(r.body, &body) == nil && strings.Contains(fmt.Sprint(body["text"]), promote1) {
				chatOK = true
			}
		}
		mailOK := false
		for _, m := range mail.messages() {
			mailOK = mailOK || strings.Contains(string(m), promote1)
		}
		return chatOK && mailOK
	}, 100*time.Millisecond)

	// 2. Ten webhook deliveries within the debounce window: one run, with all ten, though
	// the worker (which runs the trigger's gate workflow) is SIGKILLed after the fifth.
	start := time.Now()
	deliver := func(i int) {
		body := fmt.Appendf(nil, `{"shard": "s%d"}`, i)
		if code, out := postWebhookTo(t, ctx, e.APIURL, ws, "data-platform", secret, time.Now(), "delivery-"+strconv.Itoa(i), body, nil); code != 202 {
			t.Fatalf("delivery %d: %d %s", i, code, out)
		}
	}
	for i := range 5 {
		deliver(i)
	}
	second.kill()
	if second.cmd.ProcessState == nil || second.cmd.ProcessState.Success() {
		t.Fatalf("the second worker was not killed: %v", second.cmd.ProcessState)
	}
	startWorker(t, e, stateDir)
	for i := 5; i < 10; i++ {
		deliver(i)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatalf("the ten deliveries took %s, longer than the 20s window", time.Since(start))
	}
	var run2 string
	testutil.Eventually(t, itest.Left(ctx), "the data platform's run", func() bool {
		l, err := c.ListPipelines(ctx, ws, dlc.ListOptions{Labels: []string{schemas.LabelTrigger + "=data-platform"}})
		if err != nil || len(l.Items) == 0 {
			return false
		}
		run2 = l.Items[0].Name
		return true
	}, 200*time.Millisecond)
	p2 := waitRetrain(t, ctx, c, ws, run2)
	testutil.Consistently(t, 2*time.Second, "one run for the ten deliveries", func() error {
		l, err := c.ListPipelines(ctx, ws, dlc.ListOptions{Labels: []string{schemas.LabelTrigger + "=data-platform"}})
		if err == nil && len(l.Items) != 1 {
			return fmt.Errorf("%d runs: %v", len(l.Items), l.Items)
		}
		return err
	}, 200*time.Millisecond)
	if logs := logsOf(t, ctx, c, ws, p2.Status.Step("prepare").Job); !strings.Contains(logs, "from 10 event(s)") {
		t.Errorf("run %s's prepare did not see ten events:\n%s", run2, logs)
	}
	acc2 := stepMetric(t, p2, "evaluate", "accuracy")
	better := p2.Status.Step("better")
	t.Logf("run %s: accuracy %v; run %s: accuracy %v, better %v", run1, acc1, run2, acc2, *better.ConditionResult)
	rec := productionRecord(t, ctx, e, record)
	if acc2 > acc1 {
		if !*better.ConditionResult || p2.Status.Step("promote").Phase != schemas.StepSucceeded || rec["run"] != run2 {
			t.Fatalf("run %s beat %s (%v > %v) but was not promoted: record %v", run2, run1, acc2, acc1, rec)
		}
		waitDeploys(t, ctx, c, ws, 2)
	} else {
		if *better.ConditionResult || p2.Status.Step("promote").Phase != schemas.StepSkipped || rec["run"] != run1 {
			t.Fatalf("run %s did not beat %s (%v <= %v) but the record is %v, promote %s", run2, run1, acc2, acc1, rec, p2.Status.Step("promote").Phase)
		}
		testutil.Consistently(t, 2*time.Second, "no second deploy", func() error {
			if d := listDeploys(t, ctx, c, ws); len(d) != 1 {
				return fmt.Errorf("%d deploy jobs", len(d))
			}
			return nil
		}, 200*time.Millisecond)
	}
}

// waitRetrain waits for a retrain run to end and requires it Succeeded.
func waitRetrain(t *testing.T, ctx context.Context, c *dlc.Client, ws, run string) *api.PipelineRun {
	t.Helper()
	p, err := c.WaitPipeline(ctx, ws, run, 250*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != schemas.PipelineSucceeded {
		for _, s := range p.Status.Steps {
			t.Logf("step %s: %s %s: %s", s.Name, s.Phase, s.Reason, s.Message)
		}
		t.Fatalf("run %s %s: %s", run, p.Status.Phase, p.Status.Message)
	}
	return p
}

// stepMetric is a step's reported metric.
func stepMetric(t *testing.T, p *api.PipelineRun, step, key string) float64 {
	t.Helper()
	s := p.Status.Step(step)
	if s == nil {
		t.Fatalf("no step %s", step)
	}
	v, ok := s.Metrics[key]
	if !ok {
		t.Fatalf("step %s reported no %s: %v", step, key, s.Metrics)
	}
	return v
}

// listDeploys are the deploy trigger's jobs.
func listDeploys(t *testing.T, ctx context.Context, c *dlc.Client, ws string) []api.JobSummary {
	t.Helper()
	l, err := c.ListJobs(ctx, ws, dlc.ListOptions{Labels: []string{schemas.LabelTrigger + "=deploy-on-promote"}})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// waitDeploys waits for n deploy jobs, all Succeeded, and returns them.
func waitDeploys(t *testing.T, ctx context.Context, c *dlc.Client, ws string, n int) []api.JobSummary {
	t.Helper()
	var out []api.JobSummary
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("%d deploy job(s) to succeed", n), func() bool {
		out = listDeploys(t, ctx, c, ws)
		if len(out) != n {
			return false
		}
		for _, j := range out {
			if j.Phase != schemas.JobSucceeded {
				return false
			}
		}
		return true
	}, 200*time.Millisecond)
	return out
}
