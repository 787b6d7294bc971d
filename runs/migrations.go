package runs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A migration is one numbered step of the schema. Its statements are written once for
// both dialects: {{key}} stands for a text column that is compared and sorted byte by
// byte (PostgreSQL: TEXT COLLATE "C", whatever the database's locale; SQLite: TEXT, whose
// default collation is binary), so that prefix ranges, ordering and the cursor behave the
// same on both. A step whose SQL differs per dialect says so in its statements.
type migration struct {
	version int
	what    string
	stmts   []string
}

// migrations are the schema's steps, in order; a database's version is the number of
// the last step applied. Append steps; never change one that has shipped.
var migrations = []migration{
	{1, "runs, their labels, inputs and attempts", []string{
		// One row per record. The columns are what queries filter and sort on; record is
		// the whole Record as JSON, which is what reads return. Times are UTC unix
		// microseconds.
		`CREATE TABLE runs (
			workspace    {{key}} NOT NULL,
			kind         {{key}} NOT NULL,
			uid          {{key}} NOT NULL,
			name         {{key}} NOT NULL,
			phase        {{key}} NOT NULL,
			origin_kind  {{key}} NOT NULL,
			origin_name  {{key}} NOT NULL,
			parent       {{key}} NOT NULL,
			submitted_by {{key}} NOT NULL,
			checkpoint   {{key}} NOT NULL,
			submitted    BIGINT NOT NULL,
			finished     BIGINT NOT NULL,
			record       TEXT NOT NULL,
			PRIMARY KEY (workspace, kind, uid)
		)`,
		`CREATE INDEX runs_order ON runs (finished, uid, kind, workspace)`,
		`CREATE INDEX runs_name ON runs (workspace, kind, name, finished)`,
		`CREATE INDEX runs_origin ON runs (origin_kind, origin_name, finished)`,
		`CREATE INDEX runs_parent ON runs (workspace, parent)`,
		`CREATE INDEX runs_phase ON runs (phase, finished)`,
		`CREATE INDEX runs_checkpoint ON runs (checkpoint)`,
		`CREATE INDEX runs_submitted_by ON runs (submitted_by, finished)`,
		// A record's child rows go with it (SQLite: foreign_keys is on for every
		// connection the store opens).
		`CREATE TABLE run_labels (
			workspace {{key}} NOT NULL,
			kind      {{key}} NOT NULL,
			uid       {{key}} NOT NULL,
			key       {{key}} NOT NULL,
			value     {{key}} NOT NULL,
			PRIMARY KEY (workspace, kind, uid, key),
			FOREIGN KEY (workspace, kind, uid) REFERENCES runs (workspace, kind, uid) ON DELETE CASCADE
		)`,
		`CREATE INDEX run_labels_value ON run_labels (key, value)`,
		`CREATE TABLE run_inputs (
			workspace {{key}} NOT NULL,
			kind      {{key}} NOT NULL,
			uid       {{key}} NOT NULL,
			uri       {{key}} NOT NULL,
			PRIMARY KEY (workspace, kind, uid, uri),
			FOREIGN KEY (workspace, kind, uid) REFERENCES runs (workspace, kind, uid) ON DELETE CASCADE
		)`,
		`CREATE INDEX run_inputs_uri ON run_inputs (uri)`,
		// An attempt's time and what the run's replicas held meanwhile; end is NULL for
		// an attempt that has none (it counts up to the run's finished).
		`CREATE TABLE attempts (
			workspace    {{key}} NOT NULL,
			kind         {{key}} NOT NULL,
			uid          {{key}} NOT NULL,
			attempt      INTEGER NOT NULL,
			start_us     BIGINT NOT NULL,
			end_us       BIGINT,
			gpu          BIGINT NOT NULL,
			cpu          DOUBLE PRECISION NOT NULL,
			memory_bytes BIGINT NOT NULL,
			PRIMARY KEY (workspace, kind, uid, attempt),
			FOREIGN KEY (workspace, kind, uid) REFERENCES runs (workspace, kind, uid) ON DELETE CASCADE
		)`,
	}},
	{2, "index attempts by workspace and start for usage over a time range", []string{
		`CREATE INDEX attempts_start ON attempts (workspace, start_us)`,
	}},
}

// latestVersion is the schema version this code writes and reads.
func latestVersion() int { return migrations[len(migrations)-1].version }

// ErrSchemaTooNew is returned by Open for a database that a newer OpenDLC has migrated
// past what this code knows.
var ErrSchemaTooNew = errors.New("runs: database schema is newer than this program")

// migrate applies the steps up to version target, each in a transaction of its own
// with its row in schema_migrations. Two processes migrating at once serialize: on
// PostgreSQL each step's transaction first takes a transaction-scoped advisory lock;
// on SQLite every transaction of the store begins IMMEDIATE (the write lock). The one
// that waited then sees the step applied and goes on. A database at a version above
// latestVersion is refused with ErrSchemaTooNew.
func migrate(ctx context.Context, db *sql.DB, d dialect, target int) error {
	for {
		done, err := migrateStep(ctx, db, d, target)
		if err != nil || done {
			return err
		}
	}
}

// migrateStep applies the next step below target, or reports that there is none.
func migrateStep(ctx context.Context, db *sql.DB, d dialect, target int) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("runs: migrate: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if d.migrationLock != "" {
		if _, err := tx.ExecContext(ctx, d.migrationLock); err != nil {
			return false, fmt.Errorf("runs: migrate: lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		applied BIGINT NOT NULL
	)`); err != nil {
		return false, fmt.Errorf("runs: migrate: create schema_migrations: %w", err)
	}
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return false, err
	}
	if current > latestVersion() {
		return false, fmt.Errorf("%w: the database is at version %d, this program knows versions up to %d: upgrade it", ErrSchemaTooNew, current, latestVersion())
	}
	if current >= target {
		return true, tx.Commit()
	}
	m := migrations[current] // versions are 1, 2, ... in order
	for _, stmt := range m.stmts {
		if _, err := tx.ExecContext(ctx, d.ddl(stmt)); err != nil {
			return false, fmt.Errorf("runs: migration %d (%s): %w", m.version, m.what, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied) VALUES ($1, $2)`,
		m.version, time.Now().UnixMicro()); err != nil {
		return false, fmt.Errorf("runs: migration %d: record the version: %w", m.version, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("runs: migration %d (%s): commit: %w", m.version, m.what, err)
	}
	return false, nil
}

// queryer is what *sql.DB and *sql.Tx share.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// schemaVersion is the highest version in schema_migrations, 0 for none.
func schemaVersion(ctx context.Context, q queryer) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("runs: read the schema version: %w", err)
	}
	return int(v.Int64), nil
}

// ddl is stmt in d's words.
func (d dialect) ddl(stmt string) string {
	return strings.ReplaceAll(stmt, "{{key}}", d.keyType)
}
