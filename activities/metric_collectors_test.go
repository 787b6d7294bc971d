package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/storage"
)

func TestLineParserReadsRegexGroups(t *testing.T) {
	// Katib's StdOut collector filter, and a line that logs several metrics in one.
	p, err := newLineParser([]string{
		`(?P<step>\d+)/\d+ .*loss=(?P<loss>[0-9.eE+-]+)`,
		`(?P<name_unused>acc)uracy: (?P<accuracy>\S+)`,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line    string
		want    events.Metrics
		invalid []string
	}{
		{"120/1000 [=====>....] loss=4.1e-01 lr=0.01", events.Metrics{"step": 120, "loss": 0.41}, nil},
		{"eval accuracy: 0.875", events.Metrics{"accuracy": 0.875}, []string{"name_unused"}},
		{"eval accuracy: nan", events.Metrics{"accuracy": math.NaN()}, []string{"name_unused"}},
		{"dlc:metric step=7 loss=0.2", events.Metrics{"step": 7, "loss": 0.2}, nil},
		{"nothing here", nil, nil},
	} {
		got, invalid := p.parse(tc.line)
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateNaNs()); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.line, diff)
		}
		if diff := cmp.Diff(tc.invalid, invalid); diff != "" {
			t.Errorf("%q invalid (-want +got):\n%s", tc.line, diff)
		}
	}
	// Without collectors, only metric lines count.
	var none *lineParser
	if got, _ := none.parse("120/1000 loss=0.4"); got != nil {
		t.Errorf("no collector read %v", got)
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "metrics", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseMetricFilesInLibraryFormats(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		file    string
		format  schemas.MetricFileFormat
		want    []metricRow
		wantBad string
	}{
		{"trainer_state.json", schemas.MetricFileHFTrainerState, []metricRow{
			{1, events.Metrics{"epoch": 0.4, "grad_norm": 3.2150862216949463, "learning_rate": 4.2e-05, "loss": 0.6932, "step": 50}},
			{2, events.Metrics{"epoch": 0.8, "grad_norm": 2.871043920516968, "learning_rate": 3.4000000000000007e-05, "loss": 0.5871, "step": 100}},
			{3, events.Metrics{"epoch": 1, "eval_accuracy": 0.812, "eval_loss": 0.44113263487815857, "eval_runtime": 1.2345,
				"eval_samples_per_second": 810.04, "eval_steps_per_second": 101.255, "step": 125}},
			{4, events.Metrics{"epoch": 1.2, "grad_norm": 4.0012359619140625, "learning_rate": 2.6e-05, "loss": 0.4217, "step": 150}},
			{5, events.Metrics{"epoch": 1.6, "grad_norm": nan, "learning_rate": 1.8e-05, "loss": 0.3902, "step": 200}},
			{6, events.Metrics{"epoch": 2, "eval_accuracy": 0.853, "eval_loss": 0.3876548111438751, "eval_runtime": 1.1873,
				"eval_samples_per_second": 842.247, "eval_steps_per_second": 105.281, "step": 250}},
			{7, events.Metrics{"epoch": 2, "step": 250, "total_flos": 131592192000000, "train_loss": 0.4519341888427734,
				"train_runtime": 30.1024, "train_samples_per_second": 66.445, "train_steps_per_second": 8.306}},
		}, ""},
		{"lightning_metrics.csv", schemas.MetricFileCSV, []metricRow{
			{1, events.Metrics{"epoch": 0, "step": 49, "train_loss": 0.6523401737213135}},
			{2, events.Metrics{"epoch": 0, "step": 99, "train_loss": 0.5012345910072327}},
			{3, events.Metrics{"epoch": 0, "step": 99, "val_acc": 0.8125, "val_loss": 0.4321017563343048}},
			{4, events.Metrics{"epoch": 1, "step": 149, "train_loss": 0.4123021960258484}},
			{5, events.Metrics{"epoch": 1, "step": 199, "train_loss": 0.3921195864677429}},
			{6, events.Metrics{"epoch": 1, "step": 199, "val_acc": 0.853000020980835, "val_loss": 0.3877420127391815}},
		}, ""},
		{"keras_training.log", schemas.MetricFileCSV, []metricRow{
			{1, events.Metrics{"epoch": 0, "step": 0, "accuracy": 0.8234999775886536, "loss": 0.5021437406539917, "val_accuracy": 0.8690000176429749, "val_loss": 0.3684256076812744}},
			{2, events.Metrics{"epoch": 1, "step": 1, "accuracy": 0.8651999831199646, "loss": 0.3733229637145996, "val_accuracy": 0.8751999735832214, "val_loss": 0.3440011143684387}},
			{3, events.Metrics{"epoch": 2, "step": 2, "accuracy": 0.8784000277519226, "loss": 0.3332139551639557, "val_accuracy": 0.8712000250816345, "val_loss": 0.35021787881851196}},
		}, ""},
		{"metrics.jsonl", schemas.MetricFileJSONL, []metricRow{
			{1, events.Metrics{"step": 10, "loss": 0.91, "lr": 0.001}},
			{2, events.Metrics{"step": 20, "loss": nan, "lr": 0.001}},
			{3, nil},
			{4, events.Metrics{"step": 30, "eval_accuracy": 0.75}},
		}, "row 3: invalid character 'o' in literal null (expecting 'u')"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rows, bad, err := parseMetricFile(tc.format, readFixture(t, tc.file), true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, rows, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			if got := errString(bad); got != tc.wantBad {
				t.Errorf("bad rows: %q, want %q", got, tc.wantBad)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestParseMetricFilesWhileWritten(t *testing.T) {
	// A line still being written waits, unless the file is read a last time.
	rows, _, _ := parseMetricFile(schemas.MetricFileCSV, []byte("epoch,loss\r\n0,0.5\r\n1,0.4"), false)
	if len(rows) != 1 {
		t.Errorf("partial row read: %v", rows)
	}
	rows, _, _ = parseMetricFile(schemas.MetricFileCSV, []byte("epoch,loss\r\n0,0.5\r\n1,0.4"), true)
	if len(rows) != 2 || rows[1].Values["loss"] != 0.4 {
		t.Errorf("last read: %v", rows)
	}
	rows, _, _ = parseMetricFile(schemas.MetricFileJSONL, []byte(`{"loss": 1}`+"\n"+`{"loss": 0.`), false)
	if len(rows) != 1 {
		t.Errorf("partial line read: %v", rows)
	}
	// A trainer_state.json cut short by a rewrite is read again later.
	state := readFixture(t, "trainer_state.json")
	if _, _, err := parseMetricFile(schemas.MetricFileHFTrainerState, state[:len(state)/2], false); err == nil {
		t.Error("half a trainer_state.json read")
	}
}

// memStream is a JetStream stand-in for the tail tests: what is published is read
// back, and messages with an id already published are dropped (as JetStream's
// duplicate window does, here for ever, so a test sees a repeated row only through
// the counts of publishes).
type memStream struct {
	mu       sync.Mutex
	msgs     []events.Msg
	attempts int // messages handed to Publish, duplicates included
}

func (s *memStream) Publish(_ context.Context, msgs ...events.Msg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts += len(msgs)
	s.msgs = append(s.msgs, msgs...)
	return nil
}

func (s *memStream) LastMsg(context.Context, string, string) ([]byte, error) { return nil, nil }

func (s *memStream) ReadUntil(_ context.Context, _, filter string, _ func() bool, fn func(string, []byte) error) error {
	s.mu.Lock()
	msgs := slices.Clone(s.msgs)
	s.mu.Unlock()
	for _, m := range msgs {
		if m.Subject == filter {
			if err := fn(m.Subject, m.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// rows are the published rows' (seq, values) in order, and the ids published twice.
func (s *memStream) rows(t *testing.T) (rows []metricRow, dups []string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, m := range s.msgs {
		if seen[m.ID] {
			dups = append(dups, m.ID)
		}
		seen[m.ID] = true
		var ev events.Event
		var d events.MetricData
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, metricRow{N: d.Seq, Values: d.Values})
	}
	return rows, dups
}

// dirBackend is a backend whose replicas run in one directory.
type dirBackend struct {
	backend.Backend
	dir string
}

func (b dirBackend) WorkingDir(string) (string, bool) { return b.dir, true }

func newTail(t *testing.T, s *memStream, dir string, c schemas.FileCollector, since time.Time) *fileTail {
	t.Helper()
	a := &JobActivities{Publisher: s, Events: s, Backend: dirBackend{dir: dir}}
	in := ForwardLogsInput{Ref: backend.GangRef{Workspace: "ml", Job: "train", Attempt: 1}, UID: "u1",
		Replicas: []schemas.ReplicaStatus{{Name: "train-a1-master-0"}}, MetricFiles: []schemas.FileCollector{c}, Since: since}
	tails := a.metricFileTails(context.Background(), in, func(events.Metrics) {})
	if len(tails) != 1 {
		t.Fatalf("%d tails", len(tails))
	}
	if err := tails[0].resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tails[0]
}

func TestFileTailPublishesEachRowOnce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "logs", "metrics.csv")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	s := &memStream{}
	c := schemas.FileCollector{Path: "logs/metrics.csv", Format: schemas.MetricFileCSV}
	tail := newTail(t, s, dir, c, time.Now().Add(-time.Minute))

	// Lightning flushes training rows first, with the keys it has seen so far.
	write("epoch,step,train_loss\r\n0,49,0.65\r\n0,99,0.50\r\n0,1")
	if err := tail.read(ctx, false); err != nil {
		t.Fatal(err)
	}
	// Validation brings new keys: Lightning rewrites the file with the new header.
	write("epoch,step,train_loss,val_acc,val_loss\r\n0,49,0.65,,\r\n0,99,0.50,,\r\n0,149,0.41,,\r\n0,149,,0.81,0.43\r\n")
	if err := tail.read(ctx, false); err != nil {
		t.Fatal(err)
	}
	// The worker dies here; another one's tail resumes from the stream.
	tail = newTail(t, s, dir, c, time.Now().Add(-time.Minute))
	write("epoch,step,train_loss,val_acc,val_loss\r\n0,49,0.65,,\r\n0,99,0.50,,\r\n0,149,0.41,,\r\n0,149,,0.81,0.43\r\n1,199,0.39,,")
	if err := tail.read(ctx, false); err != nil {
		t.Fatal(err)
	}
	// The replica has ended: the last row, without its newline, is read too.
	if err := tail.read(ctx, true); err != nil {
		t.Fatal(err)
	}
	rows, dups := s.rows(t)
	want := []metricRow{
		{1, events.Metrics{"epoch": 0, "step": 49, "train_loss": 0.65}},
		{2, events.Metrics{"epoch": 0, "step": 99, "train_loss": 0.50}},
		{3, events.Metrics{"epoch": 0, "step": 149, "train_loss": 0.41}},
		{4, events.Metrics{"epoch": 0, "step": 149, "val_acc": 0.81, "val_loss": 0.43}},
		{5, events.Metrics{"epoch": 1, "step": 199, "train_loss": 0.39}},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("published rows (-want +got):\n%s", diff)
	}
	if len(dups) > 0 || s.attempts != len(want) {
		t.Errorf("rows published again: %v (%d publishes)", dups, s.attempts)
	}
	for _, m := range s.msgs {
		if !strings.HasPrefix(m.ID, "u1:a1:train-a1-master-0:f0:") || m.Subject != "dlc.ml.job.train.metrics" {
			t.Errorf("message %s on %s", m.ID, m.Subject)
		}
	}
}

func TestFileTailSkipsAnEarlierRunsFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "trainer_state.json")
	if err := os.WriteFile(file, readFixture(t, "trainer_state.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(file, old, old); err != nil {
		t.Fatal(err)
	}
	s := &memStream{}
	tail := newTail(t, s, dir, schemas.FileCollector{Path: "trainer_state.json", Format: schemas.MetricFileHFTrainerState}, time.Now().Add(-time.Minute))
	if err := tail.read(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.rows(t); len(rows) != 0 {
		t.Fatalf("an earlier run's file was read: %v", rows)
	}
	// Once this run writes it, it is read.
	now := time.Now()
	if err := os.Chtimes(file, now, now); err != nil {
		t.Fatal(err)
	}
	if err := tail.read(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.rows(t); len(rows) != 7 || rows[6].Values["train_loss"] != 0.4519341888427734 {
		t.Errorf("rows %v", rows)
	}
}

func TestFileTailNeedsALocalBackend(t *testing.T) {
	a := &JobActivities{Backend: noDirs{}}
	in := ForwardLogsInput{Replicas: []schemas.ReplicaStatus{{Name: "r"}}, MetricFiles: []schemas.FileCollector{{Path: "m.csv", Format: schemas.MetricFileCSV}}}
	if tails := a.metricFileTails(context.Background(), in, nil); tails != nil {
		t.Errorf("tails on a backend without working directories: %v", tails)
	}
}

type noDirs struct{ backend.Backend }

func (noDirs) Name() string { return "kubernetes" }

// s3Objects is an S3 stand-in for the tail tests.
type s3Objects map[string]s3Object

type s3Object struct {
	data []byte
	mod  time.Time
}

func (o s3Objects) StatObject(_ context.Context, uri string) (checkpoint.ObjectInfo, bool, error) {
	obj, ok := o[uri]
	return checkpoint.ObjectInfo{Size: int64(len(obj.data)), Modified: obj.mod, ETag: fmt.Sprintf("%x", sha256.Sum256(obj.data))}, ok, nil
}

func (o s3Objects) ReadObject(_ context.Context, uri string) ([]byte, error) {
	obj, ok := o[uri]
	if !ok {
		return nil, errors.New("NoSuchKey")
	}
	return obj.data, nil
}

type fixedLocations []storage.Location

func (l fixedLocations) Locations(context.Context, string) ([]storage.Location, error) { return l, nil }

// An s3:// metrics file is read from the object, whole at each change, on any backend;
// one outside the workspace's storage is refused.
func TestFileTailReadsAnS3Object(t *testing.T) {
	ctx := context.Background()
	uri := "s3://dlc/workspaces/ml/runs/trainer_state.json"
	objs := s3Objects{}
	s := &memStream{}
	state := readFixture(t, "trainer_state.json")
	a := &JobActivities{Publisher: s, Events: s, Backend: noDirs{}, MetricObjects: objs,
		Storage: fixedLocations{{Bucket: "dlc", Prefix: "workspaces/ml/"}}}
	in := ForwardLogsInput{Ref: backend.GangRef{Workspace: "ml", Job: "train", Attempt: 0}, UID: "u1",
		Replicas:    []schemas.ReplicaStatus{{Name: "train-a0-worker-0"}},
		MetricFiles: []schemas.FileCollector{{Path: uri, Format: schemas.MetricFileHFTrainerState}}, Since: time.Now().Add(-time.Minute)}
	tails := a.metricFileTails(ctx, in, func(events.Metrics) {})
	if len(tails) != 1 {
		t.Fatalf("%d tails on a backend without working directories, want the S3 one", len(tails))
	}
	tail := tails[0]
	if err := tail.resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tail.read(ctx, false); err != nil { // no object yet
		t.Fatal(err)
	}
	// The first save holds 3 entries of log_history; a later one all 7.
	var doc map[string]any
	if err := json.Unmarshal(bytes.ReplaceAll(state, []byte("NaN"), []byte("null")), &doc); err != nil {
		t.Fatal(err)
	}
	doc["log_history"] = doc["log_history"].([]any)[:3]
	first, _ := json.MarshalIndent(doc, "", "  ")
	objs[uri] = s3Object{first, time.Now()}
	if err := tail.read(ctx, false); err != nil {
		t.Fatal(err)
	}
	objs[uri] = s3Object{state, time.Now()}
	if err := tail.read(ctx, true); err != nil {
		t.Fatal(err)
	}
	rows, dups := s.rows(t)
	if len(rows) != 7 || len(dups) > 0 || rows[2].Values["eval_accuracy"] != 0.812 || rows[6].N != 7 {
		t.Errorf("rows %v, published twice %v", rows, dups)
	}

	in.MetricFiles[0].Path = "s3://dlc/workspaces/other/trainer_state.json"
	if err := a.metricFileTails(ctx, in, nil)[0].resume(ctx); ErrorType(err) != ErrTypeInvalidSpec ||
		!strings.Contains(err.Error(), "outside workspace ml's storage") {
		t.Errorf("a file outside the workspace's storage: %v", err)
	}
}

// Hugging Face's Trainer writes trainer_state.json into each checkpoint-N directory it
// saves (and removes old ones beyond save_total_limit): a pattern reads the newest.
func TestFileTailFollowsTheNewestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	var doc map[string]any
	if err := json.Unmarshal(bytes.ReplaceAll(readFixture(t, "trainer_state.json"), []byte("NaN"), []byte("null")), &doc); err != nil {
		t.Fatal(err)
	}
	history := doc["log_history"].([]any)
	save := func(step, entries int, mod time.Time) {
		t.Helper()
		doc["log_history"] = history[:entries]
		data, _ := json.MarshalIndent(doc, "", "  ")
		p := filepath.Join(dir, "out", fmt.Sprintf("checkpoint-%d", step), "trainer_state.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	s := &memStream{}
	tail := newTail(t, s, dir, schemas.FileCollector{Path: "out/checkpoint-*/trainer_state.json", Format: schemas.MetricFileHFTrainerState}, time.Now().Add(-time.Minute))
	now := time.Now()
	save(100, 2, now.Add(-30*time.Second))
	if err := tail.read(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	// checkpoint-250 sorts before checkpoint-50 but is newer; checkpoint-100 is gone.
	save(50, 1, now.Add(-20*time.Second))
	save(250, 7, now.Add(-10*time.Second))
	if err := os.RemoveAll(filepath.Join(dir, "out", "checkpoint-100")); err != nil {
		t.Fatal(err)
	}
	if err := tail.read(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	rows, dups := s.rows(t)
	if len(rows) != 7 || len(dups) > 0 || rows[6].Values["train_loss"] != 0.4519341888427734 {
		t.Errorf("rows %v, published twice %v", rows, dups)
	}
}

// The forwarder publishes a line a stdout collector matched as a metric event, like a
// metric line, with the line's sequence number.
func TestForwarderPublishesRegexMatches(t *testing.T) {
	p, err := newLineParser([]string{`loss: (?P<loss>[0-9.]+) - acc: (?P<accuracy>[0-9.]+)`})
	if err != nil {
		t.Fatal(err)
	}
	f := &logForwarder{in: ForwardLogsInput{Ref: backend.GangRef{Workspace: "ws", Job: "j", Attempt: 1}, UID: "u"},
		replica: schemas.ReplicaStatus{Name: "j-worker-0"}, parser: p}
	m, ok := f.metricMsg(context.Background(), backend.LogLine{Seq: 12, Line: "100/100 [====] - 1s - loss: 0.7500 - acc: 0.25"})
	if !ok {
		t.Fatal("no metric event")
	}
	var ev events.Event
	var d events.MetricData
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	if m.ID != "u:a1:j-worker-0:m12" || m.Subject != "dlc.ws.job.j.metrics" || d.Seq != 12 || d.Source != "" ||
		!cmp.Equal(d.Values, events.Metrics{"loss": 0.75, "accuracy": 0.25}) {
		t.Errorf("message %s on %s: %+v", m.ID, m.Subject, d)
	}
	if _, ok := f.metricMsg(context.Background(), backend.LogLine{Seq: 13, Line: "Epoch 2/4"}); ok {
		t.Error("a line without a match published")
	}
}

// A metrics file that is a symbolic link out of the working directory is not read: a
// job cannot have the worker read another file of the host. A link inside it is.
func TestFileTailStaysInTheWorkingDirectory(t *testing.T) {
	root := t.TempDir()
	wd, outside := filepath.Join(root, "wd"), filepath.Join(root, "secret.csv")
	if err := os.MkdirAll(filepath.Join(wd, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte("epoch,secret\n0,42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wd, "metrics.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(wd, "logs", "up")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"metrics.csv", "logs/up/secret.csv"} {
		s := &memStream{}
		tail := newTail(t, s, wd, schemas.FileCollector{Path: p, Format: schemas.MetricFileCSV}, time.Time{})
		if err := tail.read(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		if rows, _ := s.rows(t); len(rows) != 0 || !strings.Contains(tail.warned, "leads out of the working directory") {
			t.Errorf("%s: read %v (warned %q)", p, rows, tail.warned)
		}
	}
	// A link that stays inside is followed.
	if err := os.WriteFile(filepath.Join(wd, "logs", "real.csv"), []byte("epoch,loss\n0,0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("logs/real.csv", filepath.Join(wd, "inside.csv")); err != nil {
		t.Fatal(err)
	}
	s := &memStream{}
	tail := newTail(t, s, wd, schemas.FileCollector{Path: "inside.csv", Format: schemas.MetricFileCSV}, time.Time{})
	if err := tail.read(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.rows(t); len(rows) != 1 || rows[0].Values["loss"] != 0.5 {
		t.Errorf("a link inside the working directory: %v", rows)
	}
}

// In the local sandbox the worker reads no file of the working directory; S3 objects
// it still reads.
func TestFileTailInTheSandbox(t *testing.T) {
	a := &JobActivities{Backend: sandboxed{}, MetricObjects: s3Objects{}}
	in := ForwardLogsInput{Replicas: []schemas.ReplicaStatus{{Name: "r"}}, MetricFiles: []schemas.FileCollector{
		{Path: "m.csv", Format: schemas.MetricFileCSV}, {Path: "s3://dlc/ws/m.csv", Format: schemas.MetricFileCSV}}}
	tails := a.metricFileTails(context.Background(), in, nil)
	if len(tails) != 1 || tails[0].path != "s3://dlc/ws/m.csv" {
		t.Errorf("tails in the sandbox: %+v", tails)
	}
}

type sandboxed struct{ backend.Backend }

func (sandboxed) WorkingDir(wd string) (string, bool) { return wd, false }

// tmpBackend keeps its replicas' /tmp in one directory.
type tmpBackend struct {
	backend.Backend
	tmp string
}

func (b tmpBackend) ReplicaTmpDir(ref backend.GangRef, replica string) (string, bool) {
	return filepath.Join(b.tmp, ref.ID(), replica), true
}

// A /tmp/... path is read in the replica's own /tmp, as the backend places it (the
// sandbox's per-replica directory), whatever the working directory.
func TestFileTailReadsTheReplicasTmp(t *testing.T) {
	ctx := context.Background()
	b := tmpBackend{tmp: t.TempDir()}
	s := &memStream{}
	a := &JobActivities{Publisher: s, Events: s, Backend: b}
	in := ForwardLogsInput{Ref: backend.GangRef{Workspace: "ml", Job: "train", Attempt: 2}, UID: "u1",
		Replicas:    []schemas.ReplicaStatus{{Name: "train-a2-worker-0"}},
		MetricFiles: []schemas.FileCollector{{Path: "/tmp/run/metrics.jsonl", Format: schemas.MetricFileJSONL}, {Path: "m.csv", Format: schemas.MetricFileCSV}}}
	tails := a.metricFileTails(ctx, in, func(events.Metrics) {})
	if len(tails) != 1 {
		t.Fatalf("%d tails, want the /tmp one (the backend has no working directories)", len(tails))
	}
	dir, _ := b.ReplicaTmpDir(in.Ref, "train-a2-worker-0")
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run", "metrics.jsonl"), readFixture(t, "metrics.jsonl"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tails[0].resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tails[0].read(ctx, true); err != nil {
		t.Fatal(err)
	}
	if rows, dups := s.rows(t); len(rows) != 3 || len(dups) > 0 || rows[2].N != 4 {
		t.Errorf("rows %v, published twice %v", rows, dups)
	}
}

func (tmpBackend) Name() string { return "test" }
