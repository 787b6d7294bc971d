package devstack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PostgreSQL from the host's installation starts in a directory of its own (as the
// postgres user when the test runs as root), answers SQL, and starts again on the same
// cluster with its data.
func TestPostgresStartsAndKeepsItsData(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	dir := postgresTestDir(t)
	pg, err := StartPostgres(ctx, PostgresOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	psql := func(sql string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, filepath.Join(pg.bin, "psql"), "-h", pg.Host, "-p", strconv.Itoa(pg.Port),
			"-U", pg.User, "-d", "postgres", "-tAc", sql).CombinedOutput()
		if err != nil {
			t.Fatalf("psql %q: %v\n%s", sql, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	psql("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('here')")
	if err := pg.Close(); err != nil {
		t.Fatal(err)
	}
	port := pg.Port
	pg, err = StartPostgres(ctx, PostgresOptions{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	if got := psql("SELECT v FROM kept"); got != "here" {
		t.Errorf("after a restart: %q, want here", got)
	}
}

// postgresTestDir is a fresh directory, removed at the end of the test, that PostgreSQL
// can reach: it runs as the postgres user when the test runs as root, and t.TempDir's
// directories let only their owner through.
func postgresTestDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "opendlc-postgres-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
