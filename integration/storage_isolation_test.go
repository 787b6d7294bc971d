package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/checkpoint"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// TestStorageIsolation runs a stack with StorageIsolation (each workspace confined to
// s3://dlc/workspaces/<workspace>/, its replicas holding its own gateway account):
//   - workspace B's job checkpoints with its account;
//   - a replica of workspace A (a real process of the local backend, boto3 with the
//     credentials it was given) tries to read, list, copy, overwrite and delete B's
//     checkpoint objects: each is refused with AccessDenied by the gateway, and every
//     object of B's is still there, unchanged;
//   - A's own checkpoints (keep: 1, pruned by the worker) and a resume from one work;
//   - documents of every kind naming B's location are refused at submit with 422 and
//     the field's path, and nothing is created;
//   - a job whose workspace's locations change while it runs is refused at its next
//     launch.
func TestStorageIsolation(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 6*time.Minute)
	dir := t.TempDir()
	e := itest.StartStack(t, ctx, embedded.Config{WorkDir: dir, StorageIsolation: true})
	c := itest.AdminClient(t, e)
	const a, b = "iso-a", "iso-b"
	raw, bucket, _ := itest.RawS3(t, e, "s3://dlc/x")

	// B checkpoints with its own account.
	itest.Submit(t, ctx, c, itest.JobDoc("train", b, fmt.Sprintf(`
  framework: pytorch
  command: [%q, --epochs, "2"]
  roles: {worker: {replicas: 1}}
  checkpoint: {uri: s3://dlc/workspaces/%s/ckpt}
`, env.trainer, b)))
	jb := isoSucceeded(t, ctx, c, b, "train")
	if !strings.HasPrefix(jb.Status.LastCheckpoint, "s3://dlc/workspaces/iso-b/ckpt/") {
		t.Fatalf("B's last checkpoint %q", jb.Status.LastCheckpoint)
	}
	// B's checkpoints: the job's log archive (logarchive) lands under logs/ when its
	// workflow ends, which may be after the job reads Succeeded.
	before := objects(t, ctx, raw, bucket, "workspaces/iso-b/ckpt/")
	var keys []string
	for k := range before {
		keys = append(keys, strings.TrimPrefix(k, "workspaces/iso-b/"))
	}
	slices.Sort(keys)
	if len(keys) < 2 {
		t.Fatalf("B's objects: %v", keys)
	}
	t.Logf("B's objects: %v", keys)

	// A's replica tries to reach them.
	out := filepath.Join(dir, "intruder.json")
	script := filepath.Join(itest.Root(), "integration", "testdata", "s3_intruder.py")
	argv := append([]string{"/usr/bin/python3", script, out, bucket, "workspaces/iso-a/", "workspaces/iso-b/"}, keys...)
	argvYAML, _ := json.Marshal(argv)
	itest.Submit(t, ctx, c, itest.JobDoc("intruder", a, fmt.Sprintf(`
  framework: custom
  command: %s
  roles: {worker: {replicas: 1}}
`, argvYAML)))
	isoSucceeded(t, ctx, c, a, "intruder")
	var report struct {
		Access  string            `json:"access"`
		Results map[string]string `json:"results"`
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatal(err)
	}
	t.Logf("A's replica (access key %s): %v", report.Access, report.Results)
	if report.Access != "dlcws-iso-a" {
		t.Errorf("A's replica signed with %q, want its workspace's account dlcws-iso-a", report.Access)
	}
	for _, op := range []string{"put-own", "list-own"} {
		if report.Results[op] != "OK" {
			t.Errorf("%s in A's own prefix: %s, want OK", op, report.Results[op])
		}
	}
	for _, op := range []string{"get-other", "list-other", "list-bucket", "copy-out", "overwrite-other", "delete-other", "delete-batch"} {
		if report.Results[op] != "AccessDenied" {
			t.Errorf("%s on B's objects: %q, want AccessDenied", op, report.Results[op])
		}
	}
	if r := report.Results["dotdot"]; r == "" || r == "OK" {
		t.Errorf("reading B's object through a .. key: %q, want refused", r)
	}
	if after := objects(t, ctx, raw, bucket, "workspaces/iso-b/ckpt/"); !maps.Equal(before, after) {
		t.Errorf("B's objects changed:\nbefore %v\nafter  %v", before, after)
	}

	// The kubernetes backend's seam (the opendlc-s3 Secret of A's namespace) gets the
	// same account, which the gateway confines the same way.
	kc, err := e.S3CredentialsFor(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if kc.AccessKeyID != "dlcws-iso-a" || kc.SecretAccessKey == e.Stack.S3.SecretKey {
		t.Errorf("pods of A would get access key %q (the root account's secret: %v)", kc.AccessKeyID, kc.SecretAccessKey == e.Stack.S3.SecretKey)
	}
	pods := s3.New(s3.Options{BaseEndpoint: aws.String(e.Stack.S3.Endpoint), Region: kc.Region, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(kc.AccessKeyID, kc.SecretAccessKey, "")})
	if _, err := pods.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("workspaces/iso-b/" + keys[0])}); !isAccessDenied(err) {
		t.Errorf("A's pod credentials reading B's object: %v, want AccessDenied", err)
	}
	if _, err := pods.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("workspaces/iso-a/")}); err != nil {
		t.Errorf("A's pod credentials listing A's prefix: %v", err)
	}

	// A's own checkpoints, pruned to one, and a resume from it.
	itest.Submit(t, ctx, c, itest.JobDoc("train", a, fmt.Sprintf(`
  framework: pytorch
  command: [%q, --epochs, "3"]
  roles: {worker: {replicas: 1}}
  checkpoint: {uri: s3://dlc/workspaces/%s/ckpt, keep: 1}
`, env.trainer, a)))
	ja := isoSucceeded(t, ctx, c, a, "train")
	ref := ja.Status.LastCheckpoint
	if !strings.HasPrefix(ref, "s3://dlc/workspaces/iso-a/ckpt/") {
		t.Fatalf("A's last checkpoint %q", ref)
	}
	store, err := checkpoint.NewStore(e.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := store.List(ctx, "s3://dlc/workspaces/iso-a/ckpt"); err != nil || len(ms) != 1 {
		t.Errorf("A's complete checkpoints after keep: 1: %d (%v), want 1", len(ms), err)
	}
	itest.Submit(t, ctx, c, itest.JobDoc("resume", a, fmt.Sprintf(`
  framework: pytorch
  command: [%q, --epochs, "4"]
  roles: {worker: {replicas: 1}}
  checkpoint: {uri: s3://dlc/workspaces/%s/ckpt2, resumeFrom: %q}
`, env.trainer, a, ref)))
	isoSucceeded(t, ctx, c, a, "resume")
	if !logsContain(t, ctx, c, a, "resume", "resumed from "+ref) {
		t.Errorf("job resume never logged %q", "resumed from "+ref)
	}

	t.Run("submit", func(t *testing.T) { testStorageSubmit(t, ctx, c) })
	t.Run("launch", func(t *testing.T) { testStorageLaunch(t, ctx, e, c, dir) })
}

// testStorageSubmit submits a document of every kind naming B's location from A: 422
// naming the field, nothing created.
func testStorageSubmit(t *testing.T, ctx context.Context, c *dlc.Client) {
	other := "s3://dlc/workspaces/iso-b/ckpt"
	job := func(extra string) string {
		return "framework: custom\n        command: [\"true\"]\n        roles: {worker: {replicas: 1}}\n        " + extra
	}
	jobDoc := func(name, extra string) string {
		return itest.JobDoc(name, "iso-a", "  framework: custom\n  command: [\"true\"]\n  roles: {worker: {replicas: 1}}\n  "+extra+"\n")
	}
	cases := []struct {
		name, field string
		submit      func() error
		get         func() error
	}{
		{"job checkpoint", "spec.checkpoint.uri", func() error {
			_, err := c.SubmitJob(ctx, []byte(jobDoc("j1", "checkpoint: {uri: "+other+"}")))
			return err
		}, func() error { _, err := c.GetJob(ctx, "iso-a", "j1"); return err }},
		{"job resumeFrom", "spec.checkpoint.resumeFrom", func() error {
			_, err := c.SubmitJob(ctx, []byte(jobDoc("j2", "checkpoint: {uri: s3://dlc/workspaces/iso-a/c, resumeFrom: "+other+"/000000000001}")))
			return err
		}, func() error { _, err := c.GetJob(ctx, "iso-a", "j2"); return err }},
		{"job data", "spec.data[0].uri", func() error {
			_, err := c.SubmitJob(ctx, []byte(jobDoc("j3", "data: [{name: d, uri: "+other+"/}]")))
			return err
		}, func() error { _, err := c.GetJob(ctx, "iso-a", "j3"); return err }},
		{"experiment", "spec.trialTemplate.checkpoint.uri", func() error {
			_, err := c.CreateExperiment(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: e1, workspace: iso-a}
spec:
  searchSpace: [{name: lr, type: float, min: 0.1, max: 1}]
  objective: {metric: accuracy, direction: maximize}
  algorithm: {name: random}
  maxTrials: 1
  trialTemplate:
    framework: custom
    command: ["true"]
    roles: {worker: {replicas: 1}}
    checkpoint: {uri: "%s/${params.lr}"}
`, other)))
			return err
		}, func() error { _, err := c.GetExperiment(ctx, "iso-a", "e1"); return err }},
		{"pipeline", "spec.steps[0].job.checkpoint.uri", func() error {
			_, err := c.RunPipeline(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Pipeline
metadata: {name: p1, workspace: iso-a}
spec:
  steps:
    - name: s
      job:
        %s
`, job("checkpoint: {uri: "+other+"}"))), nil)
			return err
		}, func() error { _, err := c.GetPipeline(ctx, "iso-a", "p1"); return err }},
		{"schedule", "spec.runOptions.skipIfNoNewDataUnder", func() error {
			_, err := c.CreateSchedule(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: s1, workspace: iso-a}
spec:
  cron: "0 3 * * *"
  runOptions: {skipIfNoNewDataUnder: %s/}
  action:
    jobTemplate:
      spec:
        %s
`, other, job(""))))
			return err
		}, func() error { _, err := c.GetSchedule(ctx, "iso-a", "s1", 0); return err }},
		{"trigger", "spec.action.job.checkpoint.uri", func() error {
			_, err := c.ApplyTrigger(ctx, []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: t1, workspace: iso-a}
spec:
  subject: dlc.iso-a.trigger.t1
  params: {k: "${event.id}"}
  action:
    job:
        %s
`, job("checkpoint: {uri: \""+other+"/${params.k}\"}"))))
			return err
		}, func() error { _, err := c.GetTrigger(ctx, "iso-a", "t1"); return err }},
	}
	// A schedule created inside A's location cannot be updated to B's.
	sched := func(uri string) []byte {
		return []byte(fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: s2, workspace: iso-a}
spec:
  cron: "0 3 * * *"
  action:
    jobTemplate:
      spec:
        %s
`, job("checkpoint: {uri: "+uri+"}")))
	}
	if _, err := c.CreateSchedule(ctx, sched("s3://dlc/workspaces/iso-a/s2")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		err := tc.submit()
		var ae *dlc.Error
		if !errors.As(err, &ae) || ae.Status != 422 {
			t.Errorf("%s: %v, want 422", tc.name, err)
			continue
		}
		var fields []string
		for _, d := range ae.API.Details {
			fields = append(fields, d.Field)
		}
		if !slices.Contains(fields, tc.field) {
			t.Errorf("%s: 422 names %v, want %s (%s)", tc.name, fields, tc.field, ae.API.Message)
		}
		if err := tc.get(); !errors.As(err, &ae) || ae.Status != 404 {
			t.Errorf("%s: after the refusal, get answers %v, want 404", tc.name, err)
		}
	}
	_, err := c.UpdateSchedule(ctx, "iso-a", "s2", sched(other))
	var ae *dlc.Error
	if !errors.As(err, &ae) || ae.Status != 422 || len(ae.API.Details) == 0 ||
		ae.API.Details[0].Field != "spec.action.jobTemplate.spec.checkpoint.uri" {
		t.Errorf("schedule update to B's location: %v, want 422 naming spec.action.jobTemplate.spec.checkpoint.uri", err)
	}
	v, err := c.GetSchedule(ctx, "iso-a", "s2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Spec.Spec.Action.JobTemplate.Spec.Checkpoint.URI; got != "s3://dlc/workspaces/iso-a/s2" {
		t.Errorf("after the refused update the schedule checkpoints under %s", got)
	}
}

// testStorageLaunch changes a workspace's locations while its job's first attempt runs:
// the second attempt is refused at launch and the job fails, naming the location.
func testStorageLaunch(t *testing.T, ctx context.Context, e *embedded.Embedded, c *dlc.Client, dir string) {
	const ws = "iso-c"
	if _, err := c.CreateWorkspace(ctx, api.Workspace{Name: ws, Storage: &api.WorkspaceStorage{Locations: []string{"s3://dlc/teams/c/"}}}); err != nil {
		t.Fatal(err)
	}
	// Outside the registered location: refused at submit.
	if _, err := c.SubmitJob(ctx, []byte(itest.ShellJob(ws, "default-loc", "true")+"  checkpoint: {uri: s3://dlc/workspaces/iso-c/ckpt}\n")); err == nil {
		t.Error("a job of iso-c naming the default location, which its registry entry replaced, was accepted")
	}
	release := filepath.Join(dir, "release-c")
	itest.Submit(t, ctx, c, itest.ShellJob(ws, "moved", fmt.Sprintf("until [ -e %s ]; do sleep 0.1; done; exit 1", release))+
		"  checkpoint: {uri: s3://dlc/teams/c/ckpt}\n  faultTolerance: {maxRestarts: 2}\n")
	itest.WaitJob(t, ctx, c, ws, "moved", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })

	// An administrator moves the workspace's storage.
	js, err := jetstream.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	moveWorkspaceStorage(t, ctx, js, ws, "s3://dlc/teams/c2/")
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	j := itest.WaitJob(t, ctx, c, ws, "moved", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	t.Logf("job moved: %s: %s", j.Status.Phase, j.Status.Message)
	if j.Status.Phase != schemas.JobFailed || !strings.Contains(j.Status.Message, "outside the workspace's storage") {
		t.Errorf("job after its workspace's storage moved: %s: %s; want Failed, outside the workspace's storage", j.Status.Phase, j.Status.Message)
	}
}

// isAccessDenied reports whether err is S3's AccessDenied.
func isAccessDenied(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "AccessDenied"
}

// isoSucceeded waits for a job of the stack c serves to end and requires it to succeed.
func isoSucceeded(t *testing.T, ctx context.Context, c *dlc.Client, ws, name string) *api.Job {
	t.Helper()
	j := itest.WaitJob(t, ctx, c, ws, name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s/%s: %s: %s", ws, name, j.Status.Phase, j.Status.Message)
	}
	return j
}

// objects maps every key under prefix to its ETag and size.
func objects(t *testing.T, ctx context.Context, c *s3.Client, bucket, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			out[aws.ToString(o.Key)] = fmt.Sprintf("%s/%d", aws.ToString(o.ETag), aws.ToInt64(o.Size))
		}
	}
	return out
}

// logsContain reports whether a job's log has a line containing s.
func logsContain(t *testing.T, ctx context.Context, c *dlc.Client, ws, name, s string) bool {
	t.Helper()
	found := false
	if err := c.Logs(ctx, ws, name, dlc.LogOptions{}, func(r events.LogRecord) error {
		found = found || strings.Contains(r.Line, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}
