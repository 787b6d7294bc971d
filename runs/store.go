package runs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/opendlc/opendlc/schemas"
)

// ErrInvalid is wrapped by the errors of Put, List, Usage and Delete for bad input;
// the error names the field or parameter (a schemas.ErrorList or schemas.FieldError is
// in its chain).
var ErrInvalid = errors.New("runs: invalid input")

// Limits of a List page.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Connection limits. SQLite serializes writers on the file (busy_timeout makes a
// writer wait for the lock, also for another process's); readers in WAL mode do not
// wait for writers.
const (
	sqliteMaxConns   = 4
	sqliteBusyMillis = 10000
	postgresMaxConns = 10
	postgresMaxIdle  = 5
	maxConnIdleTime  = 5 * time.Minute
)

// dialect is what differs between the two databases. The SQL of every query is shared:
// both take $1 placeholders, ON CONFLICT DO NOTHING and row-value comparisons.
type dialect struct {
	name string
	// keyType is the column type of compared and sorted text (see migration).
	keyType string
	// migrationLock is run first in each migration transaction (PostgreSQL: an
	// advisory lock; SQLite's transactions are IMMEDIATE instead).
	migrationLock string
}

var (
	sqliteDialect   = dialect{name: "SQLite", keyType: "TEXT"}
	postgresDialect = dialect{name: "PostgreSQL", keyType: `TEXT COLLATE "C"`,
		// A constant of this package's own: "runs" in ASCII.
		migrationLock: `SELECT pg_advisory_xact_lock(1920298611)`}
)

// store is Store over database/sql.
type store struct {
	db *sql.DB
	d  dialect
}

// Open opens the store at dsn and brings its schema to the latest version:
//
//   - postgres://... or postgresql://... (a pgx connection URL) is a PostgreSQL
//     database, which must exist;
//   - sqlite:PATH, sqlite:///ABSOLUTE/PATH or a plain file path is a SQLite database
//     file, made (with its parent directories) when missing.
//
// A database whose schema is newer than this code is refused (ErrSchemaTooNew).
func Open(ctx context.Context, dsn string) (Store, error) {
	return openAt(ctx, dsn, latestVersion())
}

// openAt is Open migrating only up to version (for tests of the migrations).
func openAt(ctx context.Context, dsn string, version int) (*store, error) {
	db, d, where, err := openDB(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, db, d, version); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w (%s store %s)", err, d.name, where)
	}
	return &store{db: db, d: d}, nil
}

// schemeRE matches a DSN's URL scheme (two letters at least, so that a Windows drive
// letter is not one).
var schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]+):`)

// openDB opens and pings the database dsn names; where says which, for errors
// (without a password).
func openDB(ctx context.Context, dsn string) (db *sql.DB, d dialect, where string, err error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, d, "", errors.New("runs: empty database DSN: want postgres://..., postgresql://..., sqlite:PATH or a file path")
	}
	scheme := ""
	if m := schemeRE.FindStringSubmatch(dsn); m != nil {
		scheme = strings.ToLower(m[1])
	}
	switch scheme {
	case "postgres", "postgresql":
		d = postgresDialect
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			return nil, d, "", fmt.Errorf("runs: database DSN: %w", err)
		}
		where = cfg.Host + ":" + strconv.Itoa(int(cfg.Port)) + "/" + cfg.Database
		db, err = sql.Open("pgx", dsn)
		if err != nil {
			return nil, d, "", fmt.Errorf("runs: PostgreSQL store %s: %w", where, err)
		}
		db.SetMaxOpenConns(postgresMaxConns)
		db.SetMaxIdleConns(postgresMaxIdle)
	case "sqlite", "":
		d = sqliteDialect
		path, err := sqlitePath(dsn, scheme != "")
		if err != nil {
			return nil, d, "", err
		}
		where = path
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, d, "", fmt.Errorf("runs: SQLite store %s: %w", path, err)
		}
		// The records hold the runs' specs (environment values among them): the file is
		// its owner's only, and SQLite gives its -wal and -shm files the database
		// file's mode.
		if err := createPrivate(path); err != nil {
			return nil, d, "", fmt.Errorf("runs: SQLite store %s: %w", path, err)
		}
		// WAL: readers and one writer at once, across processes; busy_timeout: a
		// writer waits for another's lock instead of failing; IMMEDIATE transactions
		// take the write lock when they begin, so two never deadlock upgrading a read
		// lock; foreign keys: a record's child rows are deleted with it.
		q := url.Values{}
		q.Set("_busy_timeout", strconv.Itoa(sqliteBusyMillis))
		q.Set("_journal_mode", "WAL")
		q.Set("_synchronous", "NORMAL")
		q.Set("_foreign_keys", "1")
		q.Set("_txlock", "immediate")
		db, err = sql.Open("sqlite", path+"?"+q.Encode())
		if err != nil {
			return nil, d, "", fmt.Errorf("runs: SQLite store %s: %w", path, err)
		}
		db.SetMaxOpenConns(sqliteMaxConns)
		db.SetMaxIdleConns(sqliteMaxConns)
	default:
		return nil, d, "", fmt.Errorf("runs: database DSN: unsupported scheme %q: want postgres://..., postgresql://..., sqlite:PATH or a file path", scheme)
	}
	db.SetConnMaxIdleTime(maxConnIdleTime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, d, "", fmt.Errorf("runs: %s store %s: %w", d.name, where, err)
	}
	return db, d, where, nil
}

// sqlitePath is the file a SQLite DSN names: the DSN itself, or what follows
// "sqlite:" (hasScheme), where "sqlite:///abs" is /abs.
func sqlitePath(dsn string, hasScheme bool) (string, error) {
	path := dsn
	if hasScheme {
		path = dsn[len("sqlite:"):]
		if rest, ok := strings.CutPrefix(path, "//"); ok {
			if !strings.HasPrefix(rest, "/") {
				return "", fmt.Errorf("runs: database DSN %q: a SQLite DSN names a file, not a host: sqlite:PATH or sqlite:///ABSOLUTE/PATH", dsn)
			}
			path = rest
		}
	}
	if path == "" {
		return "", fmt.Errorf("runs: database DSN %q: no SQLite file path", dsn)
	}
	if strings.ContainsAny(path, "?#") {
		return "", fmt.Errorf("runs: database DSN %q: a SQLite file path may not hold '?' or '#' (the store sets the connection's options itself)", dsn)
	}
	return filepath.Clean(path), nil
}

func (s *store) Close() error { return s.db.Close() }

// micros is t as UTC unix microseconds, the form times take in the database.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros is the time of UTC unix microseconds us.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// normalize returns r with every time in UTC and cut to the microsecond, the precision
// of the database's time columns, so that the record read back and the columns the
// queries filter on agree. r's slices are not changed.
func normalize(r Record) Record {
	norm := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.UTC().Truncate(time.Microsecond)
	}
	normp := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		n := norm(*t)
		return &n
	}
	r.Submitted, r.Finished, r.Started = norm(r.Submitted), norm(r.Finished), normp(r.Started)
	if r.Attempts != nil {
		as := slices.Clone(r.Attempts)
		for i := range as {
			as[i].Start, as[i].End = norm(as[i].Start), normp(as[i].End)
		}
		r.Attempts = as
	}
	return r
}

// invalid wraps a list of problems with ErrInvalid; nil for none.
func invalid(what string, errs schemas.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalid, what, errs)
}

// validateRecord checks what the store needs of a record.
func validateRecord(r Record) error {
	var errs schemas.ErrorList
	for _, f := range []struct{ name, value string }{
		{"workspace", r.Workspace}, {"name", r.Name}, {"uid", r.UID}, {"phase", r.Phase},
	} {
		if f.value == "" {
			errs = append(errs, schemas.Required(schemas.NewPath(f.name)))
		}
	}
	if !r.Kind.Valid() {
		errs = append(errs, schemas.NotSupported(schemas.NewPath("kind"), Kinds))
	}
	if r.Finished.IsZero() {
		errs = append(errs, schemas.Required(schemas.NewPath("finished")))
	}
	for k := range r.Labels {
		if k == "" {
			errs = append(errs, schemas.Invalid(schemas.NewPath("labels"), "a label key may not be empty"))
		}
	}
	for i, in := range r.Inputs {
		if in == "" {
			errs = append(errs, schemas.Required(schemas.NewPath("inputs").Index(i)))
		}
	}
	seen := map[int]bool{}
	for i, a := range r.Attempts {
		p := schemas.NewPath("attempts").Index(i)
		if seen[a.Attempt] {
			errs = append(errs, schemas.Invalid(p.Child("attempt"), "attempt %d is there twice", a.Attempt))
		}
		seen[a.Attempt] = true
		if a.Start.IsZero() {
			errs = append(errs, schemas.Required(p.Child("start")))
		}
		if a.End != nil && a.End.Before(a.Start) {
			errs = append(errs, schemas.Invalid(p.Child("end"), "must not be before start"))
		}
	}
	if r.Demand.GPU < 0 {
		errs = append(errs, schemas.Invalid(schemas.NewPath("demand", "gpu"), "must be >= 0"))
	}
	if r.Demand.CPU < 0 {
		errs = append(errs, schemas.Invalid(schemas.NewPath("demand", "cpu"), "must be >= 0"))
	}
	if r.Demand.MemoryBytes < 0 {
		errs = append(errs, schemas.Invalid(schemas.NewPath("demand", "memoryBytes"), "must be >= 0"))
	}
	if len(r.Spec) > 0 && !json.Valid(r.Spec) {
		errs = append(errs, schemas.Invalid(schemas.NewPath("spec"), "must be JSON"))
	}
	if len(r.Result) > 0 && !json.Valid(r.Result) {
		errs = append(errs, schemas.Invalid(schemas.NewPath("result"), "must be JSON"))
	}
	return invalid("run record", errs)
}

func (s *store) Put(ctx context.Context, r Record) (written bool, err error) {
	if err := validateRecord(r); err != nil {
		return false, err
	}
	r = normalize(r)
	doc, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("runs: put %s: %w", recordKey(r.Workspace, r.Kind, r.UID), err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("runs: put %s: %w", recordKey(r.Workspace, r.Kind, r.UID), err)
	}
	defer func() {
		if !written || err != nil {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, `INSERT INTO runs (workspace, kind, uid, name, phase, origin_kind, origin_name,
		parent, submitted_by, checkpoint, submitted, finished, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING`,
		r.Workspace, string(r.Kind), r.UID, r.Name, r.Phase, r.Origin.Kind, r.Origin.Name,
		r.Parent, r.SubmittedBy, r.Checkpoint, micros(r.Submitted), micros(r.Finished), string(doc))
	if err != nil {
		return false, fmt.Errorf("runs: put %s: %w", recordKey(r.Workspace, r.Kind, r.UID), err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err // the record is there already
	}
	key := []any{r.Workspace, string(r.Kind), r.UID}
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_labels (workspace, kind, uid, key, value) VALUES ($1, $2, $3, $4, $5)`,
			append(key, k, r.Labels[k])...); err != nil {
			return false, fmt.Errorf("runs: put %s: label %s: %w", recordKey(r.Workspace, r.Kind, r.UID), k, err)
		}
	}
	for _, in := range r.Inputs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_inputs (workspace, kind, uid, uri) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
			append(key, in)...); err != nil {
			return false, fmt.Errorf("runs: put %s: input %s: %w", recordKey(r.Workspace, r.Kind, r.UID), in, err)
		}
	}
	for _, a := range r.Attempts {
		var end *int64
		if a.End != nil {
			e := micros(*a.End)
			end = &e
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (workspace, kind, uid, attempt, start_us, end_us, gpu, cpu, memory_bytes)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			append(key, a.Attempt, micros(a.Start), end, r.Demand.GPU, r.Demand.CPU, r.Demand.MemoryBytes)...); err != nil {
			return false, fmt.Errorf("runs: put %s: attempt %d: %w", recordKey(r.Workspace, r.Kind, r.UID), a.Attempt, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("runs: put %s: commit: %w", recordKey(r.Workspace, r.Kind, r.UID), err)
	}
	return true, nil
}

// recordKey names a record in errors.
func recordKey(workspace string, kind Kind, uid string) string {
	return fmt.Sprintf("%s %s/uid %s", kind, workspace, uid)
}

func (s *store) Get(ctx context.Context, workspace string, kind Kind, uid string) (Record, error) {
	var doc string
	err := s.db.QueryRowContext(ctx, `SELECT record FROM runs WHERE workspace = $1 AND kind = $2 AND uid = $3`,
		workspace, string(kind), uid).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, recordKey(workspace, kind, uid))
	}
	if err != nil {
		return Record{}, fmt.Errorf("runs: get %s: %w", recordKey(workspace, kind, uid), err)
	}
	return decodeRecord(doc)
}

func decodeRecord(doc string) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return Record{}, fmt.Errorf("runs: decode a stored record: %w", err)
	}
	return r, nil
}

// sqlArgs collects a statement's arguments and names their placeholders.
type sqlArgs []any

// add appends v and returns its placeholder.
func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// in is "column IN ($n, ...)" for vs.
func (a *sqlArgs) in(column string, vs []string) string {
	ph := make([]string, len(vs))
	for i, v := range vs {
		ph[i] = a.add(v)
	}
	return column + " IN (" + strings.Join(ph, ", ") + ")"
}

// uriMatch is the condition that column holds a URI that prefix matches (see
// pathPrefix).
func (a *sqlArgs) uriMatch(column, prefix string) string {
	exact, lo, hi := pathPrefix(prefix)
	return "(" + column + " = " + a.add(exact) + " OR (" + column + " >= " + a.add(lo) + " AND " + column + " < " + a.add(hi) + "))"
}

// sameRun is the condition that table alias t's row belongs to runs row r.
const sameRun = "%[1]s.workspace = r.workspace AND %[1]s.kind = r.kind AND %[1]s.uid = r.uid"

func (s *store) List(ctx context.Context, q Query) (Page, error) {
	var errs schemas.ErrorList
	if q.Kind != "" && !q.Kind.Valid() {
		errs = append(errs, schemas.NotSupported(schemas.NewPath("kind"), Kinds))
	}
	if q.Limit < 0 {
		errs = append(errs, schemas.Invalid(schemas.NewPath("limit"), "must be >= 0 (0 is %d)", DefaultLimit))
	}
	if !q.FinishedAfter.IsZero() && !q.FinishedBefore.IsZero() && !q.FinishedBefore.After(q.FinishedAfter) {
		errs = append(errs, schemas.Invalid(schemas.NewPath("before"), "must be after after (%s)", q.FinishedAfter.UTC().Format(time.RFC3339Nano)))
	}
	var from *cursor
	if q.After != "" {
		c, err := decodeCursor(q.After)
		if err != nil {
			errs = append(errs, schemas.Invalid(schemas.NewPath("after"), "%v", err))
		}
		from = &c
	}
	if err := invalid("run query", errs); err != nil {
		return Page{}, err
	}
	limit := pageLimit(q.Limit)

	var args sqlArgs
	var where []string
	if len(q.Workspaces) > 0 {
		where = append(where, args.in("r.workspace", q.Workspaces))
	}
	for _, f := range []struct{ column, value string }{
		{"r.kind", string(q.Kind)}, {"r.name", q.Name}, {"r.phase", q.Phase},
		{"r.origin_kind", q.OriginKind}, {"r.origin_name", q.OriginName}, {"r.parent", q.Parent},
	} {
		if f.value != "" {
			where = append(where, f.column+" = "+args.add(f.value))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(q.Labels)) {
		where = append(where, "EXISTS (SELECT 1 FROM run_labels l WHERE "+fmt.Sprintf(sameRun, "l")+
			" AND l.key = "+args.add(k)+" AND l.value = "+args.add(q.Labels[k])+")")
	}
	if !q.FinishedAfter.IsZero() {
		where = append(where, "r.finished >= "+args.add(micros(q.FinishedAfter)))
	}
	if !q.FinishedBefore.IsZero() {
		where = append(where, "r.finished < "+args.add(micros(q.FinishedBefore)))
	}
	if q.Checkpoint != "" {
		where = append(where, "("+args.uriMatch("r.checkpoint", q.Checkpoint)+
			" OR EXISTS (SELECT 1 FROM run_inputs i WHERE "+fmt.Sprintf(sameRun, "i")+" AND "+args.uriMatch("i.uri", q.Checkpoint)+"))")
	}
	if from != nil {
		where = append(where, "(r.finished, r.uid, r.kind, r.workspace) < ("+
			args.add(from.Finished)+", "+args.add(from.UID)+", "+args.add(string(from.Kind))+", "+args.add(from.Workspace)+")")
	}
	stmt := "SELECT r.record FROM runs r"
	if len(where) > 0 {
		stmt += " WHERE " + strings.Join(where, " AND ")
	}
	stmt += " ORDER BY r.finished DESC, r.uid DESC, r.kind DESC, r.workspace DESC LIMIT " + args.add(limit+1)

	rows, err := s.db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return Page{}, fmt.Errorf("runs: list: %w", err)
	}
	defer rows.Close()
	page := Page{Records: []Record{}}
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return Page{}, fmt.Errorf("runs: list: %w", err)
		}
		r, err := decodeRecord(doc)
		if err != nil {
			return Page{}, err
		}
		page.Records = append(page.Records, r)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("runs: list: %w", err)
	}
	if len(page.Records) > limit {
		page.Records = page.Records[:limit]
		page.Next = cursorOf(page.Records[limit-1]).encode()
	}
	return page, nil
}

// pageLimit is how many records a page of a query with Limit limit (>= 0) holds.
func pageLimit(limit int) int {
	if limit == 0 {
		return DefaultLimit
	}
	return min(limit, MaxLimit)
}

// runKey is a record's key.
type runKey struct {
	workspace string
	kind      string
	uid       string
}

func (s *store) Delete(ctx context.Context, workspace string, kind Kind, name, uid string) (int, error) {
	var errs schemas.ErrorList
	if workspace == "" {
		errs = append(errs, schemas.Required(schemas.NewPath("workspace")))
	}
	if !kind.Valid() {
		errs = append(errs, schemas.NotSupported(schemas.NewPath("kind"), Kinds))
	}
	if name == "" {
		errs = append(errs, schemas.Required(schemas.NewPath("name")))
	}
	if err := invalid("delete run records", errs); err != nil {
		return 0, err
	}
	stmt := `SELECT workspace, kind, uid FROM runs WHERE workspace = $1 AND kind = $2 AND name = $3`
	args := []any{workspace, string(kind), name}
	if uid != "" {
		stmt += ` AND uid = $4`
		args = append(args, uid)
	}
	n, _, err := s.deleteSelected(ctx, stmt, args...)
	if err != nil {
		return n, fmt.Errorf("runs: delete %s %s/%s: %w", kind, workspace, name, err)
	}
	return n, nil
}

// expireBatch is how many expired records (and their children) one transaction of
// Expire deletes, so that a large sweep does not hold the database's write lock long.
const expireBatch = 500

func (s *store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	return s.expire(ctx, cutoff, expireBatch)
}

// expire is Expire in transactions of batch expired records each.
func (s *store) expire(ctx context.Context, cutoff time.Time, batch int) (int, error) {
	total := 0
	for {
		n, roots, err := s.deleteSelected(ctx,
			`SELECT workspace, kind, uid FROM runs WHERE finished < $1 ORDER BY finished LIMIT $2`, micros(cutoff), batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("runs: expire records finished before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
		}
		if roots < batch {
			return total, nil
		}
	}
}

// deleteSelected deletes, in one transaction, the records that the query selects
// (workspace, kind, uid rows) and the records whose Parent is one of the deleted,
// their children's and so on; their labels, inputs and attempts go with them (ON
// DELETE CASCADE). It returns how many records it deleted and how many the query
// selected.
func (s *store) deleteSelected(ctx context.Context, query string, args ...any) (deleted, selected int, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	roots, err := selectKeys(ctx, tx, query, args...)
	if err != nil {
		return 0, 0, err
	}
	seen := map[runKey]bool{}
	todo := roots
	for len(todo) > 0 {
		k := todo[0]
		todo = todo[1:]
		if seen[k] {
			continue
		}
		seen[k] = true
		children, err := selectKeys(ctx, tx, `SELECT workspace, kind, uid FROM runs WHERE workspace = $1 AND parent = $2`, k.workspace, k.uid)
		if err != nil {
			return 0, 0, err
		}
		todo = append(todo, children...)
		res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE workspace = $1 AND kind = $2 AND uid = $3`, k.workspace, k.kind, k.uid)
		if err != nil {
			return 0, 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, 0, err
		}
		deleted += int(n)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, err
	}
	return deleted, len(roots), nil
}

// selectKeys reads the record keys a query selects.
func selectKeys(ctx context.Context, q queryer, query string, args ...any) ([]runKey, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []runKey
	for rows.Next() {
		var k runKey
		if err := rows.Scan(&k.workspace, &k.kind, &k.uid); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// createPrivate makes the file at path, mode 0600, unless it exists.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}
