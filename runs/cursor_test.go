package runs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCursorEncoding(t *testing.T) {
	for _, c := range []cursor{
		{Finished: time.Date(2026, 3, 10, 9, 30, 0, 123456000, time.UTC).UnixMicro(), UID: "0b7e-41", Kind: KindJob, Workspace: "team-a"},
		{Finished: -1, UID: "ü/\x00", Kind: KindPipeline, Workspace: "w"},
		{Finished: time.Time{}.UnixMicro(), UID: strings.Repeat("u", 300), Kind: KindExperiment, Workspace: "w"},
	} {
		token := c.encode()
		if strings.ContainsAny(token, "+/=") {
			t.Errorf("%q is not unpadded base64url", token)
		}
		got, err := decodeCursor(token)
		if err != nil || got != c {
			t.Errorf("decode(encode(%+v)) = %+v, %v", c, got, err)
		}
	}
	good := cursor{Finished: 42, UID: "u", Kind: KindJob, Workspace: "w"}.encode()
	raw, _ := cursorEncoding.DecodeString(good)
	for name, token := range map[string]string{
		"empty":          "",
		"not base64":     "!!!",
		"padded":         good + "=",
		"too short":      cursorEncoding.EncodeToString(raw[:8]),
		"cut":            cursorEncoding.EncodeToString(raw[:len(raw)-1]),
		"trailing bytes": cursorEncoding.EncodeToString(append(raw, 'x')),
		"other version":  cursorEncoding.EncodeToString(append([]byte{2}, raw[1:]...)),
		"unknown kind":   cursor{Finished: 42, UID: "u", Kind: "Job", Workspace: "w"}.encode(),
		"no uid":         cursor{Finished: 42, Kind: KindJob, Workspace: "w"}.encode(),
		"no workspace":   cursor{Finished: 42, UID: "u", Kind: KindJob}.encode(),
	} {
		if _, err := decodeCursor(token); err == nil {
			t.Errorf("%s: %q decoded", name, token)
		}
	}
}

func TestPageLimit(t *testing.T) {
	for limit, want := range map[int]int{0: DefaultLimit, 1: 1, 7: 7, MaxLimit: MaxLimit, MaxLimit + 1: MaxLimit, 1 << 40: MaxLimit} {
		if got := pageLimit(limit); got != want {
			t.Errorf("pageLimit(%d) = %d, want %d", limit, got, want)
		}
	}
}

// The migrations are numbered 1, 2, ... in order: migrate applies migrations[v] to a
// database at version v.
func TestMigrationsNumbered(t *testing.T) {
	for i, m := range migrations {
		if m.version != i+1 || len(m.stmts) == 0 || m.what == "" {
			t.Errorf("migrations[%d] is version %d with %d statements (%q), want version %d with some", i, m.version, len(m.stmts), m.what, i+1)
		}
	}
}

func TestPathPrefix(t *testing.T) {
	for _, c := range []struct{ in, exact, lo, hi string }{
		{"s3://b/model", "s3://b/model", "s3://b/model/", "s3://b/model0"},
		{"s3://b/model/", "s3://b/model", "s3://b/model/", "s3://b/model0"},
		{"/", "/", "/", "0"},
	} {
		exact, lo, hi := pathPrefix(c.in)
		if exact != c.exact || lo != c.lo || hi != c.hi {
			t.Errorf("pathPrefix(%q) = %q, %q, %q; want %q, %q, %q", c.in, exact, lo, hi, c.exact, c.lo, c.hi)
		}
	}
}

// Open names what is wrong with a DSN, and makes a SQLite file's directories.
func TestOpenDSN(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct{ dsn, want string }{
		{"", "empty database DSN"},
		{"mysql://h/db", `unsupported scheme "mysql"`},
		{"sqlite:", "no SQLite file path"},
		{"sqlite://host/x.db", "not a host"},
		{"sqlite:/tmp/x.db?mode=ro", "may not hold '?'"},
		{"postgres://h:notaport/db", "database DSN"},
	} {
		s, err := Open(ctx, c.dsn)
		if err == nil {
			_ = s.Close()
			t.Errorf("open %q: no error", c.dsn)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("open %q: %q does not say %q", c.dsn, err, c.want)
		}
	}
	dir := t.TempDir()
	for _, dsn := range []string{
		filepath.Join(dir, "plain", "runs.db"),
		"sqlite:" + filepath.Join(dir, "scheme", "runs.db"),
		"sqlite://" + filepath.Join(dir, "url", "runs.db"),
	} {
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatalf("open %q: %v", dsn, err)
		}
		if _, err := s.Put(ctx, rec("a", KindJob, "n", "u", t0)); err != nil {
			t.Errorf("put into %q: %v", dsn, err)
		}
		_ = s.Close()
	}
	for _, sub := range []string{"plain", "scheme", "url"} {
		if _, err := os.Stat(filepath.Join(dir, sub, "runs.db")); err != nil {
			t.Errorf("%s: %v", sub, err)
		}
	}
	var mode string
	s, err := Open(context.Background(), filepath.Join(dir, "plain", "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.(*store).db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q, %v; want wal", mode, err)
	}
}
