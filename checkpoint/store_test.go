package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/opendlc/opendlc/devstack"
)

// One real S3 gateway is shared by every test of the package, started on first use so the
// pure unit tests never wait for it. Each test writes under its own prefix.
var (
	s3Once sync.Once
	s3Srv  *devstack.S3
	s3Dir  string
	s3Err  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if s3Srv != nil {
		if err := s3Srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close S3:", err)
		}
	}
	if s3Dir != "" {
		os.RemoveAll(s3Dir)
	}
	os.Exit(code)
}

// testStore returns a Store on the shared S3 server (bucket "ckpt" and "root" exist), its
// clock fixed at a known time.
func testStore(t *testing.T) *Store {
	t.Helper()
	s3Once.Do(func() {
		s3Dir, s3Err = os.MkdirTemp("", "checkpoint-s3-")
		if s3Err != nil {
			return
		}
		// The server outlives any one test, so it gets a context no test cancels.
		// The gateway writes its log next to its data directory, so both go under s3Dir.
		s3Srv, s3Err = devstack.StartS3(context.Background(), devstack.S3Options{
			Dir: filepath.Join(s3Dir, "s3"), Buckets: []string{"ckpt", "root"},
		})
	})
	if s3Err != nil {
		t.Fatalf("start S3: %v", s3Err)
	}
	s, err := NewStore(Config{
		Endpoint: s3Srv.Endpoint, Region: s3Srv.Region,
		AccessKey: s3Srv.AccessKey, SecretKey: s3Srv.SecretKey, PathStyle: true,
	}, WithClock(func() time.Time { return testTime }))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testTime = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

var uriSeq atomic.Int64

// testURI is a location private to the test, and to this run of it (-count=N shares the
// server between runs).
func testURI(t *testing.T) string {
	return fmt.Sprintf("s3://ckpt/%s-%d", strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), uriSeq.Add(1))
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// putRaw writes an object behind the package's back, as a crashed or foreign writer would.
func putRaw(t *testing.T, s *Store, uri, rel string, data []byte) {
	t.Helper()
	bucket, prefix, err := ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.put(ctxFor(t), bucket, joinKey(prefix, rel), data, ""); err != nil {
		t.Fatalf("put %s: %v", rel, err)
	}
}

func steps(ms []Manifest) []int64 {
	out := []int64{}
	for _, m := range ms {
		out = append(out, m.Step)
	}
	return out
}

func TestSaveLoadRoundTrip(t *testing.T) {
	s, ctx, uri := testStore(t), ctxFor(t), testURI(t)
	files := map[string][]byte{
		"weights.json":   []byte(`{"w":[0.5,-1.25]}`),
		"state.json":     []byte(`{"epoch":3}`),
		"shards/0.bin":   bytes.Repeat([]byte{0, 1, 2, 255}, 100_000),
		"empty-file.txt": {},
	}
	metrics := map[string]float64{"loss": 0.41, "accuracy": 0.87}

	saved, err := s.Save(ctx, uri, 120, files, metrics)
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest{
		Step: 120, Time: testTime, Metrics: metrics, Ref: uri + "/000000000120",
		Files: []File{
			{Name: "empty-file.txt", Size: 0, SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
			{Name: "shards/0.bin", Size: 400_000},
			{Name: "state.json", Size: 11},
			{Name: "weights.json", Size: 17},
		},
	}
	ignoreSums := cmpopts.IgnoreFields(File{}, "SHA256")
	if diff := cmp.Diff(want, saved, ignoreSums); diff != "" {
		t.Errorf("Save manifest (-want +got):\n%s", diff)
	}
	if saved.Files[0].SHA256 != want.Files[0].SHA256 {
		t.Errorf("sha256 of the empty file = %s", saved.Files[0].SHA256)
	}

	m, got, err := s.Load(ctx, saved.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(saved, m); diff != "" {
		t.Errorf("Load manifest (-saved +loaded):\n%s", diff)
	}
	if diff := cmp.Diff(files, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Load files (-saved +loaded):\n%s", diff)
	}

	// An unpadded ref names the same checkpoint.
	if m, _, err := s.Load(ctx, uri+"/120"); err != nil || m.Ref != saved.Ref {
		t.Errorf("Load(unpadded ref) = %q, %v", m.Ref, err)
	}
}

func TestListAndLatestSkipIncomplete(t *testing.T) {
	s, ctx, uri := testStore(t), ctxFor(t), testURI(t)

	if _, err := s.Latest(ctx, uri); !errors.Is(err, ErrNoCheckpoint) || !strings.HasPrefix(err.Error(), "checkpoint: ") {
		t.Fatalf("Latest on an empty location: %v, want ErrNoCheckpoint", err)
	}
	if ms, err := s.List(ctx, uri); err != nil || len(ms) != 0 {
		t.Fatalf("List on an empty location = %v, %v", ms, err)
	}

	// Saved out of order, and past the padding width, to check numeric ordering.
	for _, step := range []int64{20, 3, 1_000_000_000_000, 100} {
		if _, err := s.Save(ctx, uri, step, map[string][]byte{"w": []byte(strconv.FormatInt(step, 10))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A save that died before its manifest, newer than every complete one.
	putRaw(t, s, uri, "2000000000000/w", []byte("partial"))
	// Objects that are not checkpoints at all.
	putRaw(t, s, uri, "notes.txt", []byte("hello"))
	putRaw(t, s, uri, "tmp/000000000001/MANIFEST.json", []byte("{}"))
	// A sibling location whose name starts like ours.
	if _, err := s.Save(ctx, uri+"-sibling", 7, map[string][]byte{"w": nil}, nil); err != nil {
		t.Fatal(err)
	}

	ms, err := s.List(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{3, 20, 100, 1_000_000_000_000}, steps(ms)); diff != "" {
		t.Errorf("List steps (-want +got):\n%s", diff)
	}
	latest, err := s.Latest(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Step != 1_000_000_000_000 || latest.Ref != uri+"/1000000000000" {
		t.Errorf("Latest = step %d ref %s", latest.Step, latest.Ref)
	}

	_, _, err = s.Load(ctx, uri+"/2000000000000")
	if !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Load of an incomplete step: %v, want ErrNoCheckpoint", err)
	}
	_, _, err = s.Load(ctx, uri+"/555")
	if !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Load of a step never written: %v, want ErrNoCheckpoint", err)
	}
}

func TestLoadDetectsCorruption(t *testing.T) {
	s, ctx, uri := testStore(t), ctxFor(t), testURI(t)
	m, err := s.Save(ctx, uri, 5, map[string][]byte{"a": []byte("alpha"), "b": []byte("beta")}, nil)
	if err != nil {
		t.Fatal(err)
	}

	putRaw(t, s, uri, "000000000005/b", []byte("BETA"))
	if _, _, err := s.Load(ctx, m.Ref); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "file b") {
		t.Errorf("Load with a changed file: %v, want ErrCorrupt naming file b", err)
	}

	putRaw(t, s, uri, "000000000005/b", []byte("beta, longer"))
	if _, _, err := s.Load(ctx, m.Ref); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load with a resized file: %v, want ErrCorrupt", err)
	}

	putRaw(t, s, uri, "000000000005/MANIFEST.json", []byte(`{"step": 6}`))
	if _, _, err := s.Load(ctx, m.Ref); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "step 6") {
		t.Errorf("Load with a manifest for another step: %v, want ErrCorrupt", err)
	}

	putRaw(t, s, uri, "000000000005/MANIFEST.json", []byte(`not json`))
	if _, _, err := s.Load(ctx, m.Ref); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load with a garbled manifest: %v, want ErrCorrupt", err)
	}
}

func TestSaveReplacesStep(t *testing.T) {
	s, ctx, uri := testStore(t), ctxFor(t), testURI(t)
	if _, err := s.Save(ctx, uri, 1, map[string][]byte{"w": []byte("old"), "extra": []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, uri, 1, map[string][]byte{"w": []byte("new")}, map[string]float64{"loss": 1}); err != nil {
		t.Fatal(err)
	}
	m, files, err := s.Load(ctx, RefFor(uri, 1))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]byte{"w": []byte("new")}, files); diff != "" {
		t.Errorf("files after re-save (-want +got):\n%s", diff)
	}
	if m.Metrics["loss"] != 1 {
		t.Errorf("metrics after re-save = %v", m.Metrics)
	}
}

func TestBucketRootLocation(t *testing.T) {
	s, ctx := testStore(t), ctxFor(t)
	const uri = "s3://root"
	m, err := s.Save(ctx, uri, 42, map[string][]byte{"w": []byte("x")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Ref != "s3://root/000000000042" {
		t.Errorf("Ref = %s", m.Ref)
	}
	latest, err := s.Latest(ctx, uri+"/")
	if err != nil || latest.Step != 42 {
		t.Fatalf("Latest = %d, %v", latest.Step, err)
	}
	if _, _, err := s.Load(ctx, latest.Ref); err != nil {
		t.Fatal(err)
	}
}

func TestPrune(t *testing.T) {
	s, ctx, uri := testStore(t), ctxFor(t), testURI(t)
	putRaw(t, s, uri, "000000000000/w", []byte("died before step 1"))
	for step := int64(1); step <= 5; step++ {
		if _, err := s.Save(ctx, uri, step, map[string][]byte{"w": {byte(step)}, "sub/o": {byte(step)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	putRaw(t, s, uri, "000000000004/leftover", []byte("from a previous attempt"))
	putRaw(t, s, uri, "000000000003x/w", []byte("not a step dir"))
	putRaw(t, s, uri, "000000000009/w", []byte("save in progress"))

	// keep 0 keeps every complete checkpoint but still clears the dead save.
	deleted, err := s.Prune(ctx, uri, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{0}, deleted); diff != "" {
		t.Errorf("Prune(keep 0) deleted (-want +got):\n%s", diff)
	}

	deleted, err = s.Prune(ctx, uri, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{1, 2, 3}, deleted); diff != "" {
		t.Errorf("Prune(keep 2) deleted (-want +got):\n%s", diff)
	}
	ms, err := s.List(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{4, 5}, steps(ms)); diff != "" {
		t.Errorf("List after prune (-want +got):\n%s", diff)
	}

	// What is left, object by object: pruned steps are gone entirely; the kept ones, the
	// save in progress and foreign objects are untouched.
	bucket, prefix, _ := ParseURI(uri)
	out, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), prefix+"/"))
	}
	want := []string{
		"000000000003x/w",
		"000000000004/MANIFEST.json", "000000000004/leftover", "000000000004/sub/o", "000000000004/w",
		"000000000005/MANIFEST.json", "000000000005/sub/o", "000000000005/w",
		"000000000009/w",
	}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("objects after prune (-want +got):\n%s", diff)
	}

	// Pruning again changes nothing.
	if deleted, err := s.Prune(ctx, uri, 2); err != nil || len(deleted) != 0 {
		t.Errorf("second Prune = %v, %v; want nothing deleted", deleted, err)
	}
}
