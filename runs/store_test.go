package runs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/internal/testutil"
)

// backend makes fresh, empty databases of one kind for the conformance cases.
type backend struct {
	name string
	// dsn returns the DSN of a new database of the test's own.
	dsn func(t *testing.T) string
}

// TestStoreConformance runs every case against SQLite (a file in t.TempDir) and a real
// PostgreSQL server (devstack.StartPostgres, one database per case): the same queries
// give the same answers on both.
func TestStoreConformance(t *testing.T) {
	backends := []backend{
		{name: "SQLite", dsn: func(t *testing.T) string {
			return "sqlite:" + filepath.Join(t.TempDir(), "db", "runs.db")
		}},
		{name: "PostgreSQL", dsn: postgresDatabases(t)},
	}
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, dsn func(t *testing.T) string)
	}{
		{"PutTwiceWritesOnce", testPutTwice},
		{"ConcurrentPutsWriteOnce", testConcurrentPuts},
		{"GetNotFound", testGetNotFound},
		{"PutRefusesBadRecords", testPutInvalid},
		{"ListFilters", testListFilters},
		{"ListPages", testListPages},
		{"Lineage", testLineage},
		{"Usage", testUsage},
		{"DeleteWithChildren", testDelete},
		{"Expire", testExpire},
		{"MigrateFromVersion1", testMigrateFrom1},
		{"RefuseNewerSchema", testRefuseNewer},
		{"ConcurrentOpens", testConcurrentOpens},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
					defer cancel()
					c.run(t, ctx, b.dsn)
				})
			}
		})
	}
}

// postgresDatabases starts PostgreSQL for the test (on first use) and returns a func
// that creates a database of its own for each case.
func postgresDatabases(t *testing.T) func(t *testing.T) string {
	var (
		once  sync.Once
		admin *sql.DB
		addr  string
		err   error
		n     atomic.Int64
	)
	start := func() {
		// The postgres user must reach the directory when the test runs as root: one
		// of its own under the system's temporary directory, open to others.
		var dir string
		dir, err = os.MkdirTemp("", "opendlc-runs-test-")
		if err != nil {
			return
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err = os.Chmod(dir, 0o755); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var pg *devstack.Postgres
		pg, err = devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: filepath.Join(dir, "postgres")})
		if err != nil {
			return
		}
		t.Cleanup(func() { _ = pg.Close() })
		addr = pg.Address()
		admin, err = sql.Open("pgx", "postgres://"+pg.User+"@"+addr+"/postgres?sslmode=disable")
		if err == nil {
			t.Cleanup(func() { _ = admin.Close() })
		}
	}
	return func(ct *testing.T) string {
		ct.Helper()
		once.Do(start)
		if err != nil {
			ct.Fatalf("start PostgreSQL: %v", err)
		}
		name := fmt.Sprintf("runs_test_%d", n.Add(1))
		if _, err := admin.ExecContext(ct.Context(), "CREATE DATABASE "+name); err != nil {
			ct.Fatalf("create database %s: %v", name, err)
		}
		return "postgres://" + devstack.PostgresUser + "@" + addr + "/" + name + "?sslmode=disable"
	}
}

func open(t *testing.T, ctx context.Context, dsn string) *store {
	t.Helper()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.(*store)
}

// t0 is a fixed time the fixtures are relative to.
var t0 = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)

// rec is a valid record; opts change it.
func rec(workspace string, kind Kind, name, uid string, finished time.Time, opts ...func(*Record)) Record {
	r := Record{
		Workspace: workspace, Kind: kind, Name: name, UID: uid, Phase: "Succeeded",
		Origin: Origin{Kind: OriginUser}, Submitted: finished.Add(-time.Hour), Finished: finished,
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func put(t *testing.T, ctx context.Context, s Store, rs ...Record) {
	t.Helper()
	for _, r := range rs {
		ok, err := s.Put(ctx, r)
		if err != nil {
			t.Fatalf("put %s: %v", r.UID, err)
		}
		if !ok {
			t.Fatalf("put %s: reported existing", r.UID)
		}
	}
}

// uids lists every record q selects, following the pages, as uids in order.
func uids(t *testing.T, ctx context.Context, s Store, q Query) []string {
	t.Helper()
	out := []string{}
	for {
		p, err := s.List(ctx, q)
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		for _, r := range p.Records {
			out = append(out, r.UID)
		}
		if p.Next == "" {
			return out
		}
		q.After = p.Next
	}
}

// count is the number of rows of table whose uid is one of uids.
func count(t *testing.T, ctx context.Context, s *store, table string, uids ...string) int {
	t.Helper()
	var args sqlArgs
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE "+args.in("uid", uids), args...).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func testPutTwice(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	// A time in another zone and with nanoseconds is kept in UTC, to the microsecond.
	tokyo := time.FixedZone("JST", 9*3600)
	fin := time.Date(2026, 3, 10, 9, 30, 0, 123456789, tokyo)
	started := fin.Add(-50 * time.Minute)
	end := fin.Add(-time.Minute)
	r := rec("a", KindJob, "train", "u1", fin, func(r *Record) {
		r.Labels = map[string]string{"team": "vision", "env": "prod"}
		r.Started = &started
		r.Inputs = []string{"s3://b/data/train", "s3://b/data/train"}
		r.Checkpoint = "s3://b/ckpt/step-100"
		r.Attempts = []Attempt{{Attempt: 1, Start: started, End: &end, Outcome: "Succeeded", Nodes: []string{"n1"}}}
		r.Demand = Demand{GPU: 2, CPU: 8, MemoryBytes: 16 << 30}
		r.Metrics = map[string]float64{"loss": 0.25}
		r.Spec = []byte(`{"kind":"TrainingJob"}`)
	})
	ok, err := s.Put(ctx, r)
	if err != nil || !ok {
		t.Fatalf("first put: %v, %v; want true, nil", ok, err)
	}
	second := r
	second.Phase = "Failed"
	ok, err = s.Put(ctx, second)
	if err != nil || ok {
		t.Fatalf("second put: %v, %v; want false, nil", ok, err)
	}
	got, err := s.Get(ctx, "a", KindJob, "u1")
	if err != nil {
		t.Fatal(err)
	}
	want := r
	utc := func(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
	want.Finished, want.Submitted = utc(fin), utc(r.Submitted)
	s0, e0 := utc(started), utc(end)
	want.Started = &s0
	want.Attempts = []Attempt{{Attempt: 1, Start: s0, End: &e0, Outcome: "Succeeded", Nodes: []string{"n1"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if got.Finished.Location() != time.UTC || got.Finished.Nanosecond() != 123456000 {
		t.Errorf("finished %v: want UTC, to the microsecond", got.Finished)
	}
	if n := len(uids(t, ctx, s, Query{})); n != 1 {
		t.Errorf("%d records, want 1", n)
	}
	for table, want := range map[string]int{"run_labels": 2, "run_inputs": 1, "attempts": 1} {
		if n := count(t, ctx, s, table, "u1"); n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
}

func testConcurrentPuts(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	r := rec("a", KindJob, "train", "u1", t0, func(r *Record) {
		r.Labels = map[string]string{"team": "vision"}
		r.Attempts = []Attempt{{Attempt: 1, Start: t0.Add(-time.Hour)}}
	})
	const writers = 8
	var wrote atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			ok, err := s.Put(ctx, r)
			if err != nil {
				errs <- err
			}
			if ok {
				wrote.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("put: %v", err)
	}
	if n := wrote.Load(); n != 1 {
		t.Errorf("%d puts reported writing, want exactly 1", n)
	}
	for table, want := range map[string]int{"runs": 1, "run_labels": 1, "attempts": 1} {
		if n := count(t, ctx, s, table, "u1"); n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
}

func testGetNotFound(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	put(t, ctx, s, rec("a", KindJob, "train", "u1", t0))
	for _, k := range []struct {
		ws   string
		kind Kind
		uid  string
	}{{"a", KindJob, "nope"}, {"b", KindJob, "u1"}, {"a", KindExperiment, "u1"}} {
		_, err := s.Get(ctx, k.ws, k.kind, k.uid)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("get %v: %v, want ErrNotFound", k, err)
			continue
		}
		if !strings.Contains(err.Error(), k.uid) || !strings.Contains(err.Error(), k.ws) {
			t.Errorf("get %v: %q does not name the key", k, err)
		}
	}
}

func testPutInvalid(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	end := t0.Add(-2 * time.Hour)
	for _, c := range []struct {
		r     Record
		field []string
	}{
		{Record{}, []string{"workspace: required", "name: required", "uid: required", "phase: required", "kind: must be one of", "finished: required"}},
		{rec("a", "Job", "n", "u1", t0), []string{"kind: must be one of TrainingJob, Experiment, Pipeline"}},
		{rec("a", KindJob, "n", "u1", t0, func(r *Record) {
			r.Attempts = []Attempt{{Attempt: 1, Start: t0.Add(-time.Hour), End: &end}, {Attempt: 1}}
		}), []string{"attempts[0].end: must not be before start", "attempts[1].attempt: attempt 1 is there twice", "attempts[1].start: required"}},
		{rec("a", KindJob, "n", "u1", t0, func(r *Record) { r.Demand.GPU = -1; r.Spec = []byte("{") }),
			[]string{"demand.gpu: must be >= 0", "spec: must be JSON"}},
		{rec("a", KindJob, "n", "u1", t0, func(r *Record) { r.Inputs = []string{""}; r.Labels = map[string]string{"": "x"} }),
			[]string{"inputs[0]: required", "labels: a label key may not be empty"}},
	} {
		ok, err := s.Put(ctx, c.r)
		if ok || !errors.Is(err, ErrInvalid) {
			t.Errorf("put %+v: %v, %v; want false, ErrInvalid", c.r, ok, err)
			continue
		}
		for _, f := range c.field {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("put: %q does not say %q", err, f)
			}
		}
	}
	if got := uids(t, ctx, s, Query{}); len(got) != 0 {
		t.Errorf("bad puts created %v", got)
	}
}

// listFixture is six records in two workspaces.
func listFixture() []Record {
	team := func(v string, more ...string) func(*Record) {
		return func(r *Record) {
			r.Labels = map[string]string{"team": v}
			for i := 0; i+1 < len(more); i += 2 {
				r.Labels[more[i]] = more[i+1]
			}
		}
	}
	nightly := func(r *Record) { r.Origin = Origin{Kind: OriginSchedule, Name: "nightly"} }
	return []Record{
		rec("a", KindJob, "train", "u1", t0.Add(time.Hour), team("vision", "env", "prod")),
		rec("a", KindJob, "train", "u2", t0.Add(2*time.Hour), team("vision"), nightly, func(r *Record) { r.Phase = "Failed" }),
		rec("a", KindJob, "eval", "u3", t0.Add(3*time.Hour), team("nlp", "env", "prod"), nightly),
		rec("a", KindExperiment, "hpo", "e1", t0.Add(4*time.Hour)),
		rec("a", KindJob, "hpo-trial-0", "t1", t0.Add(210*time.Minute), func(r *Record) {
			r.Parent = "e1"
			r.Origin = Origin{Kind: OriginExperiment, Name: "hpo", Trial: new(int)}
		}),
		rec("b", KindJob, "train", "u4", t0.Add(90*time.Minute), team("vision")),
	}
}

func testListFilters(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	put(t, ctx, s, listFixture()...)
	for _, c := range []struct {
		name string
		q    Query
		want []string
	}{
		{"everything, newest first", Query{}, []string{"e1", "t1", "u3", "u2", "u4", "u1"}},
		{"workspace a", Query{Workspaces: []string{"a"}}, []string{"e1", "t1", "u3", "u2", "u1"}},
		{"workspace b", Query{Workspaces: []string{"b"}}, []string{"u4"}},
		{"workspaces a and b", Query{Workspaces: []string{"b", "a"}}, []string{"e1", "t1", "u3", "u2", "u4", "u1"}},
		{"unknown workspace", Query{Workspaces: []string{"c"}}, []string{}},
		{"kind", Query{Kind: KindExperiment}, []string{"e1"}},
		{"name", Query{Name: "train"}, []string{"u2", "u4", "u1"}},
		{"one label", Query{Labels: map[string]string{"team": "vision"}}, []string{"u2", "u4", "u1"}},
		{"labels are ANDed", Query{Labels: map[string]string{"team": "vision", "env": "prod"}}, []string{"u1"}},
		{"label value", Query{Labels: map[string]string{"env": "prod"}}, []string{"u3", "u1"}},
		{"missing label", Query{Labels: map[string]string{"team": "nobody"}}, []string{}},
		{"phase", Query{Phase: "Failed"}, []string{"u2"}},
		{"time range [after, before)", Query{FinishedAfter: t0.Add(2 * time.Hour), FinishedBefore: t0.Add(210 * time.Minute)}, []string{"u3", "u2"}},
		{"after only", Query{FinishedAfter: t0.Add(210 * time.Minute)}, []string{"e1", "t1"}},
		{"before only", Query{FinishedBefore: t0.Add(90 * time.Minute)}, []string{"u1"}},
		{"origin", Query{OriginKind: OriginSchedule, OriginName: "nightly"}, []string{"u3", "u2"}},
		{"origin kind", Query{OriginKind: OriginExperiment}, []string{"t1"}},
		{"origin of another name", Query{OriginKind: OriginSchedule, OriginName: "weekly"}, []string{}},
		{"parent", Query{Parent: "e1"}, []string{"t1"}},
		{"combined", Query{Workspaces: []string{"a"}, Name: "train", Phase: "Succeeded"}, []string{"u1"}},
	} {
		if got := uids(t, ctx, s, c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		q     Query
		field string
	}{
		{Query{Kind: "Job"}, "kind: must be one of"},
		{Query{Limit: -1}, "limit: must be >= 0"},
		{Query{After: "not-a-cursor"}, "after: not a cursor"},
		{Query{After: cursor{Finished: 1, UID: "u", Kind: KindJob, Workspace: "a"}.encode() + "x"}, "after: not a cursor"},
		{Query{FinishedAfter: t0, FinishedBefore: t0}, "before: must be after after"},
	} {
		if _, err := s.List(ctx, c.q); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("list %+v: %v, want ErrInvalid naming %q", c.q, err, c.field)
		}
	}
}

func testListPages(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	// 101 records, three at a time finishing at the same microsecond; and two of one
	// uid in two workspaces.
	var all []Record
	for i := range 99 {
		ws := []string{"a", "b"}[i%2]
		all = append(all, rec(ws, KindJob, "train", fmt.Sprintf("p%03d", i), t0.Add(time.Duration(i/3)*time.Minute)))
	}
	all = append(all, rec("a", KindJob, "train", "dup", t0.Add(5*time.Minute)), rec("b", KindJob, "train", "dup", t0.Add(5*time.Minute)))
	put(t, ctx, s, all...)
	want := slices.Clone(all)
	slices.SortFunc(want, func(x, y Record) int {
		if c := y.Finished.Compare(x.Finished); c != 0 {
			return c
		}
		if c := strings.Compare(y.UID, x.UID); c != 0 {
			return c
		}
		return strings.Compare(y.Workspace, x.Workspace)
	})
	key := func(r Record) string { return r.Workspace + "/" + r.UID }
	walk := func(q Query) (keys []string, pages int) {
		t.Helper()
		for {
			p, err := s.List(ctx, q)
			if err != nil {
				t.Fatalf("list page %d: %v", pages, err)
			}
			pages++
			limit := pageLimit(q.Limit)
			if len(p.Records) > limit || (p.Next != "" && len(p.Records) != limit) {
				t.Fatalf("page %d: %d records, next %q (limit %d)", pages, len(p.Records), p.Next, limit)
			}
			for _, r := range p.Records {
				keys = append(keys, key(r))
			}
			if p.Next == "" {
				return keys, pages
			}
			q.After = p.Next
		}
	}
	var wantKeys, wantA []string
	for _, r := range want {
		wantKeys = append(wantKeys, key(r))
		if r.Workspace == "a" {
			wantA = append(wantA, key(r))
		}
	}
	got, pages := walk(Query{Limit: 7})
	if diff := cmp.Diff(wantKeys, got); diff != "" {
		t.Errorf("pages of 7 (-want +got):\n%s", diff)
	}
	if pages != 15 {
		t.Errorf("%d pages of 7 for 101 records, want 15", pages)
	}
	got, pages = walk(Query{})
	if diff := cmp.Diff(wantKeys, got); diff != "" || pages != 2 {
		t.Errorf("default limit: %d pages, want 2 (100 and 1) (-want +got):\n%s", pages, diff)
	}
	got, _ = walk(Query{Workspaces: []string{"a"}, Limit: 4})
	if diff := cmp.Diff(wantA, got); diff != "" {
		t.Errorf("workspace a in pages of 4 (-want +got):\n%s", diff)
	}
	// A cursor only says where to go on from: it reaches no other workspace's records.
	p, err := s.List(ctx, Query{Workspaces: []string{"b"}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	p, err = s.List(ctx, Query{Workspaces: []string{"a"}, After: p.Next})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Records {
		if r.Workspace != "a" {
			t.Errorf("workspace a's list with b's cursor holds %s", key(r))
		}
	}
}

func testLineage(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	ckpt := func(uri string) func(*Record) { return func(r *Record) { r.Checkpoint = uri } }
	inputs := func(uris ...string) func(*Record) { return func(r *Record) { r.Inputs = uris } }
	put(t, ctx, s,
		rec("a", KindJob, "pretrain", "w1", t0.Add(1*time.Hour), ckpt("s3://b/model/ckpt-100"), inputs("s3://b/data/train")),
		rec("a", KindJob, "pretrain2", "w2", t0.Add(2*time.Hour), ckpt("s3://b/model2/ckpt-5")),
		rec("a", KindJob, "finetune", "r1", t0.Add(3*time.Hour), inputs("s3://b/model/ckpt-100", "s3://b/data/eval")),
		rec("a", KindJob, "finetune2", "r2", t0.Add(4*time.Hour), inputs("s3://b/model2")),
		rec("a", KindJob, "export", "r3", t0.Add(5*time.Hour), ckpt("s3://b/model")),
		rec("a", KindJob, "odd", "r4", t0.Add(6*time.Hour), inputs("s3://b/model_x/a", "s3://b/model%/a")),
		rec("b", KindJob, "other", "x1", t0.Add(7*time.Hour), ckpt("s3://b/model/theirs")),
	)
	for _, c := range []struct {
		prefix string
		ws     []string
		want   []string
	}{
		{"s3://b/model", nil, []string{"x1", "r3", "r1", "w1"}},
		{"s3://b/model", []string{"a"}, []string{"r3", "r1", "w1"}},
		{"s3://b/model/", []string{"a"}, []string{"r3", "r1", "w1"}},
		{"s3://b/model/ckpt-100", []string{"a"}, []string{"r1", "w1"}},
		{"s3://b/model/ckpt-1", []string{"a"}, []string{}},
		{"s3://b/model2", []string{"a"}, []string{"r2", "w2"}},
		{"s3://b/data", []string{"a"}, []string{"r1", "w1"}},
		{"s3://b/data/eval", []string{"a"}, []string{"r1"}},
		{"s3://b/model_", []string{"a"}, []string{}},
		{"s3://b/model%", []string{"a"}, []string{"r4"}},
		{"s3://b/mod", []string{"a"}, []string{}},
		{"s3://b", []string{"a"}, []string{"r4", "r3", "r2", "r1", "w2", "w1"}},
	} {
		if got := uids(t, ctx, s, Query{Workspaces: c.ws, Checkpoint: c.prefix}); !slices.Equal(got, c.want) {
			t.Errorf("lineage of %q in %v: %v, want %v", c.prefix, c.ws, got, c.want)
		}
	}
}

func testUsage(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	at := func(day, hour, minute int) time.Time { return time.Date(2026, 3, day, hour, minute, 0, 0, time.UTC) }
	ptr := func(t time.Time) *time.Time { return &t }
	const gib = 1 << 30
	put(t, ctx, s,
		// J1: 22:00-02:00 across midnight, then 03:00-03:30.
		rec("a", KindJob, "j1", "J1", at(11, 3, 30), func(r *Record) {
			r.Labels = map[string]string{"team": "vision"}
			r.Demand = Demand{GPU: 2, CPU: 8, MemoryBytes: 16 * gib}
			r.Attempts = []Attempt{{Attempt: 1, Start: at(10, 22, 0), End: ptr(at(11, 2, 0))}, {Attempt: 2, Start: at(11, 3, 0), End: ptr(at(11, 3, 30))}}
		}),
		// J2: no end: until finished, 10:00-13:00.
		rec("a", KindJob, "j2", "J2", at(11, 13, 0), func(r *Record) {
			r.Labels = map[string]string{"team": "nlp"}
			r.Demand = Demand{GPU: 1, CPU: 4, MemoryBytes: 8 * gib}
			r.Attempts = []Attempt{{Attempt: 1, Start: at(11, 10, 0)}}
		}),
		// J3: unlabelled, 9th 20:00 - 10th 01:00.
		rec("a", KindJob, "j3", "J3", at(10, 1, 0), func(r *Record) {
			r.Demand = Demand{CPU: 2, MemoryBytes: 4 * gib}
			r.Attempts = []Attempt{{Attempt: 1, Start: at(9, 20, 0), End: ptr(at(10, 1, 0))}}
		}),
		// K1: workspace b, 12:00-18:00 on the 10th.
		rec("b", KindJob, "k1", "K1", at(10, 18, 0), func(r *Record) {
			r.Labels = map[string]string{"team": "vision"}
			r.Demand = Demand{GPU: 4, CPU: 16, MemoryBytes: 32 * gib}
			r.Attempts = []Attempt{{Attempt: 1, Start: at(10, 12, 0), End: ptr(at(10, 18, 0))}}
		}),
		rec("a", KindExperiment, "hpo", "E1", at(11, 20, 0)),
	)
	for _, c := range []struct {
		name string
		q    UsageQuery
		want []UsageRow
	}{
		{"two days, by workspace", UsageQuery{Workspaces: []string{"a", "b"}, From: at(10, 0, 0), To: at(12, 0, 0)}, []UsageRow{
			// J1 2h (4, 16, 32) + J3 1h (0, 2, 4)
			{Workspace: "a", Day: "2026-03-10", GPUHours: 4, CPUHours: 18, MemoryGiBHours: 36, Runs: 2},
			// K1 6h
			{Workspace: "b", Day: "2026-03-10", GPUHours: 24, CPUHours: 96, MemoryGiBHours: 192, Runs: 1},
			// J1 2h + 0.5h (5, 20, 40) + J2 3h (3, 12, 24)
			{Workspace: "a", Day: "2026-03-11", GPUHours: 8, CPUHours: 32, MemoryGiBHours: 64, Runs: 2},
		}},
		{"cut by the range, by team", UsageQuery{Workspaces: []string{"a"}, From: at(10, 23, 0), To: at(11, 11, 0), GroupByLabel: "team"}, []UsageRow{
			// J1 23:00-24:00
			{Workspace: "a", Day: "2026-03-10", Label: "vision", GPUHours: 2, CPUHours: 8, MemoryGiBHours: 16, Runs: 1},
			// J2 10:00-11:00
			{Workspace: "a", Day: "2026-03-11", Label: "nlp", GPUHours: 1, CPUHours: 4, MemoryGiBHours: 8, Runs: 1},
			// J1 00:00-02:00, 03:00-03:30
			{Workspace: "a", Day: "2026-03-11", Label: "vision", GPUHours: 5, CPUHours: 20, MemoryGiBHours: 40, Runs: 1},
		}},
		{"no label is the empty value", UsageQuery{Workspaces: []string{"a"}, From: at(9, 0, 0), To: at(10, 0, 30), GroupByLabel: "team"}, []UsageRow{
			{Workspace: "a", Day: "2026-03-09", CPUHours: 8, MemoryGiBHours: 16, Runs: 1},
			{Workspace: "a", Day: "2026-03-10", CPUHours: 1, MemoryGiBHours: 2, Runs: 1},
		}},
		{"every workspace, from the beginning to now", UsageQuery{}, []UsageRow{
			{Workspace: "a", Day: "2026-03-09", CPUHours: 8, MemoryGiBHours: 16, Runs: 1},
			{Workspace: "a", Day: "2026-03-10", GPUHours: 4, CPUHours: 18, MemoryGiBHours: 36, Runs: 2},
			{Workspace: "b", Day: "2026-03-10", GPUHours: 24, CPUHours: 96, MemoryGiBHours: 192, Runs: 1},
			{Workspace: "a", Day: "2026-03-11", GPUHours: 8, CPUHours: 32, MemoryGiBHours: 64, Runs: 2},
		}},
		{"nothing in the range", UsageQuery{From: at(12, 0, 0), To: at(13, 0, 0)}, []UsageRow{}},
	} {
		got, err := s.Usage(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		approx := cmp.Comparer(func(x, y float64) bool { return math.Abs(x-y) < 1e-9 })
		if diff := cmp.Diff(c.want, got, approx); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	if _, err := s.Usage(ctx, UsageQuery{From: at(11, 0, 0), To: at(10, 0, 0)}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "to: must be after from") {
		t.Errorf("to before from: %v, want ErrInvalid naming to", err)
	}
}

func testDelete(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	child := func(parent string) func(*Record) {
		return func(r *Record) {
			r.Parent = parent
			r.Labels = map[string]string{"k": "v"}
			r.Inputs = []string{"s3://b/in"}
			r.Attempts = []Attempt{{Attempt: 1, Start: t0.Add(-time.Hour)}}
		}
	}
	put(t, ctx, s,
		rec("a", KindPipeline, "flow", "p1", t0),
		rec("a", KindJob, "flow-prep", "s1", t0, child("p1")),
		rec("a", KindExperiment, "flow-hpo", "x1", t0, child("p1")),
		rec("a", KindJob, "flow-hpo-trial-0", "g1", t0, child("x1")),
		rec("a", KindPipeline, "flow", "p2", t0.Add(time.Hour)),
		rec("a", KindJob, "other", "o1", t0),
		// Another workspace's record that names the same parent uid is not a child.
		rec("b", KindJob, "theirs", "y1", t0, child("p1")),
	)
	if n, err := s.Delete(ctx, "a", KindPipeline, "flow", "p1"); err != nil || n != 4 {
		t.Fatalf("delete flow p1: %d, %v; want 4 (the run, two steps, a trial)", n, err)
	}
	if got, want := uids(t, ctx, s, Query{}), []string{"p2", "y1", "o1"}; !slices.Equal(got, want) {
		t.Errorf("after deleting flow p1: %v, want %v", got, want)
	}
	for _, table := range []string{"run_labels", "run_inputs", "attempts"} {
		if n := count(t, ctx, s, table, "s1", "x1", "g1"); n != 0 {
			t.Errorf("%s: %d rows of deleted records left", table, n)
		}
		if n := count(t, ctx, s, table, "y1"); n != 1 {
			t.Errorf("%s: %d rows of workspace b's record, want 1", table, n)
		}
	}
	if n, err := s.Delete(ctx, "a", KindPipeline, "flow", ""); err != nil || n != 1 {
		t.Errorf("delete flow: %d, %v; want 1", n, err)
	}
	if n, err := s.Delete(ctx, "a", KindPipeline, "flow", ""); err != nil || n != 0 {
		t.Errorf("delete flow again: %d, %v; want 0", n, err)
	}
	if got, want := uids(t, ctx, s, Query{}), []string{"y1", "o1"}; !slices.Equal(got, want) {
		t.Errorf("after deleting flow: %v, want %v", got, want)
	}
	if _, err := s.Delete(ctx, "", "Job", "", ""); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "workspace: required") || !strings.Contains(err.Error(), "kind:") || !strings.Contains(err.Error(), "name: required") {
		t.Errorf("delete without a key: %v, want ErrInvalid naming workspace, kind and name", err)
	}
}

func testExpire(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	s := open(t, ctx, dsn(t))
	parent := func(p string) func(*Record) { return func(r *Record) { r.Parent = p } }
	put(t, ctx, s,
		rec("a", KindExperiment, "old", "old1", t0),
		rec("b", KindJob, "old", "old2", t0.Add(time.Hour)),
		rec("a", KindExperiment, "new", "new1", t0.Add(3*time.Hour)),
		// A child that finished after the cutoff goes with its expired parent; one that
		// finished before it goes while its parent stays.
		rec("a", KindJob, "old-trial", "c1", t0.Add(5*time.Hour), parent("old1")),
		rec("a", KindJob, "new-trial", "c2", t0.Add(time.Hour), parent("new1")),
	)
	// Three records finished before the cutoff (old1, old2, c2): in batches of two, two
	// transactions.
	if n, err := s.expire(ctx, t0.Add(2*time.Hour), 2); err != nil || n != 4 {
		t.Fatalf("expire in batches of 2: %d, %v; want 4", n, err)
	}
	if got, want := uids(t, ctx, s, Query{}), []string{"new1"}; !slices.Equal(got, want) {
		t.Errorf("after expiring: %v, want %v", got, want)
	}
	if n, err := s.Expire(ctx, t0.Add(2*time.Hour)); err != nil || n != 0 {
		t.Errorf("expire again: %d, %v; want 0", n, err)
	}
}

// hasIndex reports whether the database has the index name.
func hasIndex(t *testing.T, ctx context.Context, s *store, name string) bool {
	t.Helper()
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = $1`
	if s.d.name == postgresDialect.name {
		q = `SELECT COUNT(*) FROM pg_indexes WHERE indexname = $1`
	}
	var n int
	if err := s.db.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// versions lists schema_migrations.
func versions(t *testing.T, ctx context.Context, s *store) []int {
	t.Helper()
	rows, err := s.db.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func testMigrateFrom1(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	d := dsn(t)
	v1, err := openAt(ctx, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(t, ctx, v1); !slices.Equal(got, []int{1}) {
		t.Fatalf("versions at 1: %v", got)
	}
	if hasIndex(t, ctx, v1, "attempts_start") {
		t.Fatal("version 1 has version 2's index")
	}
	r := rec("a", KindJob, "train", "u1", t0, func(r *Record) {
		r.Attempts = []Attempt{{Attempt: 1, Start: t0.Add(-2 * time.Hour)}}
		r.Demand.GPU = 1
	})
	put(t, ctx, v1, r)
	if err := v1.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, ctx, d)
	if got := versions(t, ctx, s); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("versions after Open: %v, want [1 2]", got)
	}
	if !hasIndex(t, ctx, s, "attempts_start") {
		t.Error("Open did not apply version 2")
	}
	got, err := s.Get(ctx, "a", KindJob, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(normalize(r), got); diff != "" {
		t.Errorf("record after the migration (-want +got):\n%s", diff)
	}
	use, err := s.Usage(ctx, UsageQuery{Workspaces: []string{"a"}})
	if err != nil || len(use) != 1 || use[0].GPUHours != 2 {
		t.Errorf("usage after the migration: %+v, %v; want 2 GPU-hours", use, err)
	}
}

func testRefuseNewer(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	d := dsn(t)
	s, err := openAt(ctx, d, latestVersion())
	if err != nil {
		t.Fatal(err)
	}
	put(t, ctx, s, rec("a", KindJob, "train", "u1", t0))
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if s, err := Open(ctx, d); !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 99") {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("open a database at version 99: %v, want ErrSchemaTooNew naming 99", err)
	}
}

func testConcurrentOpens(t *testing.T, ctx context.Context, dsn func(*testing.T) string) {
	d := dsn(t)
	const openers = 4
	stores := make([]Store, openers)
	errs := make([]error, openers)
	var wg sync.WaitGroup
	for i := range openers {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, d) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
			continue
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	if t.Failed() {
		return
	}
	s := stores[0].(*store)
	if got := versions(t, ctx, s); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("versions: %v, want [1 2], each once", got)
	}
	// Every store works on the one schema, writing at once (on SQLite: as processes
	// that share the file do, each with connections of its own).
	for i, st := range stores {
		wg.Go(func() {
			for j := range 5 {
				if _, err := st.Put(ctx, rec("a", KindJob, "train", fmt.Sprintf("u%d-%d", i, j), t0)); err != nil {
					t.Errorf("store %d: put: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(uids(t, ctx, s, Query{})); n != openers*5 {
		t.Errorf("%d records, want %d", n, openers*5)
	}
}

// Environment of the writer process of TestSQLiteSharedByTwoProcesses.
const (
	writerDSNEnv    = "OPENDLC_RUNS_TEST_WRITER_DSN"
	writerPrefixEnv = "OPENDLC_RUNS_TEST_WRITER_PREFIX"
)

// sharedWrites is how many records each process writes.
const sharedWrites = 40

// Two processes (as the API server and a worker of `dlc up`) open one fresh SQLite file
// at once, both migrate it, and write into it at the same time: every record of both
// is there, and each migration step once. The second process is this test binary run
// again as a writer.
func TestSQLiteSharedByTwoProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if dsn := os.Getenv(writerDSNEnv); dsn != "" {
		writeShared(t, ctx, dsn, os.Getenv(writerPrefixEnv), "parent")
		return
	}
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "runs.db")
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSQLiteSharedByTwoProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), writerDSNEnv+"="+dsn, writerPrefixEnv+"=child")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	writeShared(t, ctx, dsn, "parent", "child")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer process: %v\n%s", err, out.String())
	}
	s := open(t, ctx, dsn)
	got := uids(t, ctx, s, Query{Limit: MaxLimit})
	for _, prefix := range []string{"parent", "child"} {
		n := 0
		for _, u := range got {
			if strings.HasPrefix(u, prefix+"-") {
				n++
			}
		}
		if n != sharedWrites {
			t.Errorf("%d records of the %s process, want %d", n, prefix, sharedWrites)
		}
	}
	if v := versions(t, ctx, s); !slices.Equal(v, []int{1, 2}) {
		t.Errorf("versions: %v, want [1 2], each once", v)
	}
}

// writeShared opens dsn and writes sharedWrites records whose uids start with prefix;
// after the first, it waits for the other process's first, so that the two write the
// rest at the same time.
func writeShared(t *testing.T, ctx context.Context, dsn, prefix, other string) {
	s := open(t, ctx, dsn)
	for i := range sharedWrites {
		if i == 1 {
			testutil.Eventually(t, time.Minute, "the "+other+" process's first record", func() bool {
				_, err := s.Get(ctx, "a", KindJob, other+"-000")
				return err == nil
			})
		}
		r := rec("a", KindJob, "train", fmt.Sprintf("%s-%03d", prefix, i), t0.Add(time.Duration(i)*time.Second), func(r *Record) {
			r.Labels = map[string]string{"by": prefix}
			r.Attempts = []Attempt{{Attempt: 1, Start: t0.Add(-time.Hour)}}
		})
		if ok, err := s.Put(ctx, r); err != nil || !ok {
			t.Fatalf("%s: put %s: %v, %v", prefix, r.UID, ok, err)
		}
	}
}
