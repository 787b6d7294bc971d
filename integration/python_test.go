package integration

// Cross-language tests of the Python library (python/opendlc) against the Go side, on the
// stack's real S3 gateway: checkpoints written by one language are listed, loaded (hashes
// verified), pruned and resumed by the other; metric lines printed by Python parse as the
// log forwarder parses them; the environment BuildGang gives a replica reads back in
// Python; and a real job runs Python training code that reports, checkpoints and resumes.
// The Python side is python/tests/crosslang.py, run by /usr/bin/python3 (Debian's, with
// python3-boto3: `task deps`).

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

const python = "/usr/bin/python3"

// pythonDir is the library's source tree, put on PYTHONPATH.
func pythonDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// pythonCheck runs once: whether Debian's Python and its boto3 are there.
var pythonCheck = sync.OnceValue(func() error {
	if out, err := exec.Command(python, "-c", "import boto3").CombinedOutput(); err != nil {
		return fmt.Errorf("the Python tests need %s with boto3 (Debian package python3-boto3): run `task deps` (%w: %s)", python, err, out)
	}
	return nil
})

// requirePython fails (never skips) when Debian's Python or its boto3 is missing.
func requirePython(t *testing.T) {
	t.Helper()
	if err := pythonCheck(); err != nil {
		t.Fatal(err)
	}
}

// pyDoc is what crosslang.py prints: a line "crosslang:<json>".
type pyManifest struct {
	Step    int64              `json:"step"`
	Ref     string             `json:"ref"`
	Time    string             `json:"time"`
	Metrics map[string]float64 `json:"metrics"`
	Files   []checkpoint.File  `json:"files"`
}

// runPython runs crosslang.py with args, the stack's S3 environment and extra variables,
// and decodes its JSON answer into out.
func runPython(t *testing.T, ctx context.Context, extra []string, out any, args ...string) {
	t.Helper()
	requirePython(t)
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join(pythonDir(t), "tests", "crosslang.py")}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DLC_") && !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "PYTHONPATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for _, v := range env.e.ReplicaEnv() {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	cmd.Env = append(append(cmd.Env, "PYTHONPATH="+pythonDir(t)), extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("crosslang.py %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	for line := range strings.SplitSeq(stdout.String(), "\n") {
		if doc, ok := strings.CutPrefix(line, "crosslang:"); ok {
			if err := json.Unmarshal([]byte(doc), out); err != nil {
				t.Fatalf("crosslang.py %v: decode %s: %v", args, doc, err)
			}
			return
		}
	}
	t.Fatalf("crosslang.py %v printed no answer:\n%s\nstderr:\n%s", args, stdout.String(), stderr.String())
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// diffFiles says how two sets of named files differ ("" when they do not), comparing
// contents with bytes.Equal: cmp would walk megabytes byte by byte through reflection.
func diffFiles(want, got map[string][]byte) string {
	var diffs []string
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			diffs = append(diffs, name+" missing")
		case !bytes.Equal(w, g):
			diffs = append(diffs, fmt.Sprintf("%s: %d bytes (sha256 %.12s), want %d (sha256 %.12s)", name, len(g), sha256Hex(g), len(w), sha256Hex(w)))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, name+" unexpected")
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// readTree returns every regular file under dir, by slash-separated relative name.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Go saves checkpoints; Python lists them, finds the newest complete one (not the newer
// incomplete step), loads it with every hash checked, refuses a corrupted one and one
// without a manifest.
func TestPythonReadsGoCheckpoints(t *testing.T) {
	ctx := testContext(t)
	uri := fmt.Sprintf("s3://dlc/%s/go-writes", workspace(t))
	saved := map[int64]map[string][]byte{}
	var manifests []checkpoint.Manifest
	for step := int64(1); step <= 3; step++ {
		files := map[string][]byte{
			"model.bin":       randomBytes(t, 64<<10+int(step)),
			"opt/state.json":  []byte(fmt.Sprintf(`{"step": %d}`, step)),
			"empty":           {},
			"shards/0/part-0": randomBytes(t, 100),
		}
		m, err := env.store.Save(ctx, uri, step, files, map[string]float64{"loss": 1 / float64(step), "acc": 0.5})
		if err != nil {
			t.Fatal(err)
		}
		saved[step], manifests = files, append(manifests, m)
	}
	incomplete := putPartial(t, ctx, uri, 4)

	dest := t.TempDir()
	var got struct {
		List   []int64    `json:"list"`
		Latest pyManifest `json:"latest"`
		Loaded pyManifest `json:"loaded"`
	}
	runPython(t, ctx, nil, &got, "read", uri, dest)
	if diff := cmp.Diff([]int64{1, 2, 3}, got.List); diff != "" {
		t.Errorf("Python list (-want +got):\n%s", diff)
	}
	want := manifests[2]
	wantDoc := pyManifest{
		Step: 3, Ref: want.Ref, Metrics: want.Metrics, Files: want.Files,
		// Python keeps microseconds; Go writes nanoseconds.
		Time: want.Time.Truncate(time.Microsecond).Format(time.RFC3339Nano),
	}
	if diff := cmp.Diff(wantDoc, got.Latest); diff != "" {
		t.Errorf("Python latest (-Go's manifest +Python's):\n%s", diff)
	}
	if diff := cmp.Diff(wantDoc, got.Loaded); diff != "" {
		t.Errorf("Python load (-Go's manifest +Python's):\n%s", diff)
	}
	if diff := diffFiles(saved[3], readTree(t, dest)); diff != "" {
		t.Errorf("files Python loaded differ from what Go saved: %s", diff)
	}

	// Step 2's weights replaced behind the store's back, same size: Python refuses it.
	client, bucket, prefix := rawS3(t, uri)
	key := fmt.Sprintf("%s/%0*d/model.bin", prefix, checkpoint.StepDigits, 2)
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(randomBytes(t, len(saved[2]["model.bin"])))}); err != nil {
		t.Fatal(err)
	}
	for ref, wantErr := range map[string]string{manifests[1].Ref: "CorruptCheckpoint", incomplete: "NoCheckpoint"} {
		var res struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		dest := t.TempDir()
		runPython(t, ctx, nil, &res, "load", ref, dest)
		if res.Error != wantErr {
			t.Errorf("Python load %s: error %q (%s), want %s", ref, res.Error, res.Message, wantErr)
		}
		if _, err := os.Stat(filepath.Join(dest, "model.bin")); err == nil {
			t.Errorf("Python load %s left model.bin in dest", ref)
		}
	}
}

// Python saves checkpoints (one synchronously, three in the background, with a file large
// enough for a multipart upload); Go lists, loads and prunes them; Python sees Go's prune,
// and Go sees Python's.
func TestPythonWritesGoReads(t *testing.T) {
	ctx := testContext(t)
	uri := fmt.Sprintf("s3://dlc/%s/py-writes", workspace(t))
	src := t.TempDir()
	files := map[string][]byte{
		"model.bin":            randomBytes(t, 12<<20+3), // three parts of 5 MiB at most
		"nested/dir/meta.json": []byte(`{"arch": "resnet"}`),
		"empty":                {},
	}
	for name, data := range files {
		path := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantFiles := []checkpoint.File{}
	for name, data := range files {
		wantFiles = append(wantFiles, checkpoint.File{Name: name, Size: int64(len(data)), SHA256: sha256Hex(data)})
	}
	sort.Slice(wantFiles, func(i, j int) bool { return wantFiles[i].Name < wantFiles[j].Name })

	before := time.Now().Add(-time.Second)
	var wrote struct {
		Manifests []pyManifest `json:"manifests"`
	}
	runPython(t, ctx, nil, &wrote, "write", uri, src)
	after := time.Now().Add(time.Second)

	ms, err := env.store.List(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4}, checkpointSteps(ms)); diff != "" {
		t.Fatalf("Go List of Python's checkpoints (-want +got):\n%s", diff)
	}
	for i, m := range ms {
		if diff := cmp.Diff(wantFiles, m.Files); diff != "" {
			t.Errorf("step %d files (-want +got):\n%s", m.Step, diff)
		}
		wantMetrics := map[string]float64{"loss": 1 / float64(m.Step), "step_squared": float64(m.Step * m.Step)}
		if m.Step == 1 {
			wantMetrics = map[string]float64{"loss": 1}
		}
		if diff := cmp.Diff(wantMetrics, m.Metrics); diff != "" {
			t.Errorf("step %d metrics (-want +got):\n%s", m.Step, diff)
		}
		if m.Time.Before(before) || m.Time.After(after) || m.Time.Location() != time.UTC {
			t.Errorf("step %d time %v, want UTC within the Python run [%v, %v]", m.Step, m.Time, before, after)
		}
		if py := wrote.Manifests[i]; py.Ref != m.Ref || py.Time != m.Time.Format(time.RFC3339Nano) {
			t.Errorf("step %d: Python says ref %s time %s, Go reads %s %s", m.Step, py.Ref, py.Time, m.Ref, m.Time.Format(time.RFC3339Nano))
		}
	}
	latest, err := env.store.Latest(ctx, uri)
	if err != nil || latest.Step != 4 {
		t.Fatalf("Go Latest = %d, %v; want step 4", latest.Step, err)
	}
	_, loaded, err := env.store.Load(ctx, latest.Ref)
	if err != nil {
		t.Fatalf("Go Load of Python's checkpoint: %v", err)
	}
	if diff := diffFiles(files, loaded); diff != "" {
		t.Errorf("files Go loaded differ from what Python saved: %s", diff)
	}

	// Go prunes; Python lists what is left.
	deleted, err := env.store.Prune(ctx, uri, 2)
	if err != nil || !cmp.Equal([]int64{1, 2}, deleted) {
		t.Errorf("Go Prune(2) = %v, %v; want [1 2]", deleted, err)
	}
	var listed struct {
		List []int64 `json:"list"`
	}
	runPython(t, ctx, nil, &listed, "list", uri)
	if !cmp.Equal([]int64{3, 4}, listed.List) {
		t.Errorf("Python list after Go's prune = %v, want [3 4]", listed.List)
	}

	// Python prunes by Go's rules: a dead older save goes, a newer one in progress stays.
	putPartial(t, ctx, uri, 0)
	putPartial(t, ctx, uri, 9)
	var pruned struct {
		Deleted []int64 `json:"deleted"`
	}
	runPython(t, ctx, nil, &pruned, "prune", uri, "1")
	if !cmp.Equal([]int64{0, 3}, pruned.Deleted) {
		t.Errorf("Python prune(1) deleted %v, want [0 3]", pruned.Deleted)
	}
	if got := stepsStored(t, ctx, uri); !cmp.Equal([]int64{4, 9}, got) {
		t.Errorf("steps stored after Python's prune = %v, want [4 9]", got)
	}
	if ms, err := env.store.List(ctx, uri); err != nil || !cmp.Equal([]int64{4}, checkpointSteps(ms)) {
		t.Errorf("Go List after Python's prune = %v, %v; want [4]", checkpointSteps(ms), err)
	}
}

func checkpointSteps(ms []checkpoint.Manifest) []int64 {
	out := []int64{}
	for _, m := range ms {
		out = append(out, m.Step)
	}
	return out
}

// Metric lines printed by opendlc.report parse as the forwarder parses them, and encode
// as the forwarder encodes them (JSON): non-finite values are carried, encoded as the
// strings "NaN", "Infinity" and "-Infinity".
func TestPythonMetricLinesParseInGo(t *testing.T) {
	ctx := testContext(t)
	var got struct {
		Lines []string `json:"lines"`
	}
	runPython(t, ctx, nil, &got, "report")
	want := []map[string]float64{
		{"step": 1, "loss": 0.41, "accuracy": 0.87, "tokens": 123456789012},
		{"step": 2, "loss": 1e-05, "big": 1.5e300, "neg": -0.125},
		{"step": 3, "loss": math.NaN(), "up": math.Inf(1), "down": math.Inf(-1), "accuracy": 0.5},
	}
	if len(got.Lines) != len(want) {
		t.Fatalf("lines = %q, want %d", got.Lines, len(want))
	}
	for i, line := range got.Lines {
		vals, ok := events.ParseMetricLine(line)
		if !ok {
			t.Errorf("%q is not a metric line to Go", line)
			continue
		}
		if diff := cmp.Diff(want[i], map[string]float64(vals), cmpopts.EquateNaNs()); diff != "" {
			t.Errorf("%q parsed (-want +got):\n%s", line, diff)
		}
		b, err := json.Marshal(events.MetricData{Values: vals})
		if err != nil {
			t.Errorf("%q: the forwarder could not encode it: %v", line, err)
		}
		if i == 2 && !strings.Contains(string(b), `"loss":"NaN"`) {
			t.Errorf("%q encodes as %s, want loss as \"NaN\"", line, b)
		}
	}
}

// gangHosts names each replica <role>-<index>.gang.
type gangHosts struct{}

func (gangHosts) Host(role string, index int) string { return fmt.Sprintf("%s-%d.gang", role, index) }
func (gangHosts) Port(string) int                    { return 29500 }

// The environment backend.BuildGang and the pytorch framework give a replica reads back
// in Python as the same values.
func TestPythonEnvMatchesGoGang(t *testing.T) {
	ctx := testContext(t)
	job, err := schemas.DecodeTrainingJob([]byte(itest.JobDoc("resnet", "vision", `
  framework: pytorch
  command: [python, train.py]
  roles: {worker: {replicas: 3, resources: {gpu: 2}}}
  checkpoint: {uri: s3://ckpt/vision/resnet, keep: 3, every: 90m}
  data:
    - {name: image-net, uri: s3://data/imagenet, mountPath: /data/imagenet}
    - {name: labels, uri: /srv/labels}
`)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := backend.BuildGang(job, backend.GangParams{
		Ref: backend.GangRef{Workspace: "vision", Job: "resnet", Attempt: 2}, UID: "uid-7",
		ResumeFrom: "s3://ckpt/vision/resnet/000000000120",
		Params:     map[string]any{"lr": 0.1, "layers": 4.0, "opt": "adam"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := g.Replicas[1]
	fwEnv, err := frameworks.EnvFor(g, r, gangHosts{})
	if err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, v := range append(append([]schemas.EnvVar{}, r.Env...), fwEnv...) {
		vars = append(vars, v.Name+"="+v.Value)
	}
	var got map[string]any
	runPython(t, ctx, vars, &got, "env")
	cfg := env.e.S3Config()
	want := map[string]any{
		"job": "resnet", "job_uid": "uid-7", "workspace": "vision", "attempt": 2.0, "role": "worker",
		"replica": 1.0, "replica_name": "resnet-worker-1-a2",
		"checkpoint_uri": "s3://ckpt/vision/resnet", "checkpoint_keep": 3.0,
		"checkpoint_every": "1:30:00", "checkpoint_every_seconds": 5400.0,
		"resume_from": "s3://ckpt/vision/resnet/000000000120",
		"params":      map[string]any{"lr": 0.1, "layers": 4.0, "opt": "adam"},
		"data": map[string]any{
			"IMAGE_NET": map[string]any{"name": "IMAGE_NET", "uri": "s3://data/imagenet", "path": "/data/imagenet",
				"endpoint": nil, "region": nil, "access_key_id": nil, "secret_access_key": nil},
			"LABELS": map[string]any{"name": "LABELS", "uri": "/srv/labels", "path": nil,
				"endpoint": nil, "region": nil, "access_key_id": nil, "secret_access_key": nil},
		},
		"s3": map[string]any{"endpoint": cfg.Endpoint, "region": cfg.Region, "access_key": cfg.AccessKey, "path_style": true},
		// DLC_STOP_AT_STEP is set only on the trials of a population-based experiment.
		"stop_at_step": nil,
		"rendezvous": map[string]any{
			"master_addr": "worker-0.gang", "master_port": 29500.0, "world_size": 3.0, "rank": 1.0, "node_rank": 1.0,
			"local_rank": 0.0, "local_world_size": 2.0, "hosts": map[string]any{}, "tf_config": nil,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Python's Env of replica %s (-Go's values +Python's):\n%s", r.Name, diff)
	}
}

// A real job runs Python training code on the local backend: two pytorch replicas report
// a metric line per step (one with a NaN loss), rank 0 checkpoints every step in the
// background; the control plane forwards the metrics, sees the checkpoint and prunes to
// keep. A second job resumes from the first one's checkpoint (spec.checkpoint.resumeFrom)
// and carries its state on.
func TestPythonTrainingJobReportsCheckpointsAndResumes(t *testing.T) {
	ctx := testContext(t)
	requirePython(t)
	ws := workspace(t)
	script := filepath.Join(pythonDir(t), "tests", "crosslang.py")
	runJob := func(name, uri, resumeFrom string, steps int) (checkpoint.Manifest, map[string]any) {
		t.Helper()
		resume := ""
		if resumeFrom != "" {
			resume = fmt.Sprintf(", resumeFrom: %q", resumeFrom)
		}
		submit(t, ctx, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: pytorch
  command: [%q, %q, train, "%d"]
  env: [{name: PYTHONPATH, value: %q}]
  roles:
    worker: {replicas: 2, resources: {cpu: "1", memory: 256Mi}}
  checkpoint: {uri: %q, keep: 2%s}
  timeout: 5m
`, python, script, steps, pythonDir(t), uri, resume)))
		j := waitTerminal(t, ctx, ws, name)
		if j.Status.Phase != schemas.JobSucceeded {
			for _, r := range jobLogs(t, ctx, ws, name) {
				t.Logf("[%s] %s", r.Replica, r.Line)
			}
			t.Fatalf("job %s: phase %s (%s: %s), want Succeeded", name, j.Status.Phase, j.Status.Reason, j.Status.Message)
		}
		latest, err := env.store.Latest(ctx, uri)
		if err != nil {
			t.Fatalf("job %s: no checkpoint: %v", name, err)
		}
		if latest.Step != int64(steps) || latest.Ref != j.Status.LastCheckpoint {
			t.Errorf("job %s: latest checkpoint %s (step %d), status says %q; want step %d", name, latest.Ref, latest.Step, j.Status.LastCheckpoint, steps)
		}
		if all, err := env.store.List(ctx, uri); err != nil || len(all) != 2 {
			t.Errorf("job %s: %d checkpoints kept (err %v), want 2 (keep: 2)", name, len(all), err)
		}
		_, files, err := env.store.Load(ctx, latest.Ref)
		if err != nil {
			t.Fatalf("job %s: Go Load of the Python checkpoint: %v", name, err)
		}
		var state map[string]any
		if err := json.Unmarshal(files["state.json"], &state); err != nil {
			t.Fatalf("job %s: state.json: %v (%q)", name, err, files["state.json"])
		}
		return latest, state
	}

	first, state := runJob("first", fmt.Sprintf("s3://dlc/%s/first", ws), "", 4)
	if want := map[string]any{"job": "first", "attempt": 0.0, "world_size": 2.0, "total": 10.0}; !cmp.Equal(want, state) {
		t.Errorf("first job's state = %v, want %v", state, want)
	}
	// Every step's metric line of rank 0 was forwarded, step 2's with its NaN loss, and
	// the NaN did not stop the forwarder (the lines after it arrived).
	var metrics []map[string]float64
	var trainedLine bool
	for _, r := range jobLogs(t, ctx, ws, "first") {
		if r.Index != 0 {
			continue
		}
		if vals, ok := events.ParseMetricLine(r.Line); ok {
			metrics = append(metrics, map[string]float64(vals))
		}
		trainedLine = trainedLine || r.Line == "trained from step 0 to 4"
	}
	wantMetrics := []map[string]float64{
		{"step": 1, "loss": 1, "total": 1}, {"step": 2, "loss": math.NaN(), "total": 3},
		{"step": 3, "loss": 1.0 / 3, "total": 6}, {"step": 4, "loss": 0.25, "total": 10},
	}
	if diff := cmp.Diff(wantMetrics, metrics, cmp.Comparer(func(a, b float64) bool {
		return math.Abs(a-b) < 1e-12 || (math.IsNaN(a) && math.IsNaN(b))
	})); diff != "" {
		t.Errorf("forwarded metrics of worker-0 (-want +got):\n%s", diff)
	}
	if !trainedLine {
		t.Errorf("the last line of worker-0 was not forwarded")
	}

	_, state = runJob("second", fmt.Sprintf("s3://dlc/%s/second", ws), first.Ref, 6)
	if want := map[string]any{"job": "first", "attempt": 0.0, "world_size": 2.0, "total": 21.0}; !cmp.Equal(want, state) {
		t.Errorf("resumed job's state = %v, want %v (the first job's state carried on: 10+5+6)", state, want)
	}
	var resumed bool
	for _, r := range jobLogs(t, ctx, ws, "second") {
		resumed = resumed || (r.Index == 0 && r.Line == "trained from step 4 to 6")
	}
	if !resumed {
		t.Errorf("the second job did not say it resumed from step 4")
	}
}
