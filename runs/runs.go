// Package runs keeps run records: what a job, experiment or pipeline run was, how it
// went and what it used, written once when the run ends and kept in a database of
// their own, so that history, lineage and usage outlive the Temporal namespace's
// retention of closed workflows.
//
// A record is keyed by (workspace, kind, uid): the uid is the run's id (a job's first
// run id, an experiment's or pipeline run's workflow run id). Put is idempotent on
// that key, so an activity that writes a record and is retried after a crash writes
// it once.
//
// Two stores implement Store over database/sql: SQLite (modernc.org/sqlite, pure Go,
// the default of `dlc up`) and PostgreSQL (pgx, production). Their schemas are
// versioned migrations (migrations.go), applied when the store opens.
//
// # Opening a store
//
// Open takes a DSN:
//
//   - postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=...] (or postgresql://):
//     a PostgreSQL database, which must exist; the URL is pgx's (libpq's) form.
//   - sqlite:PATH, sqlite:///ABSOLUTE/PATH or a plain file path: a SQLite file, made
//     with its parent directories when missing. The store sets the connection's options
//     itself (so PATH may not hold '?' or '#'): WAL journal, a 10 s busy timeout,
//     IMMEDIATE transactions and foreign keys, so that two processes on one machine (the
//     API and a worker of `dlc up`) share the file.
//
// Open applies the migrations the database lacks, each step in a transaction of its
// own with its row in schema_migrations; two processes opening at once apply each step
// once (PostgreSQL: an advisory lock; SQLite: the write lock). A database migrated by a
// newer program is refused with ErrSchemaTooNew.
//
// # Schema
//
// Both databases have the same tables; times are UTC unix microseconds (BIGINT), and
// text that is compared or sorted is compared byte by byte (PostgreSQL: COLLATE "C"),
// so that both answer every query alike. A record's times are kept in UTC, to the
// microsecond.
//
//   - runs: one row per record, keyed by (workspace, kind, uid), with the columns the
//     queries filter on (name, phase, origin_kind, origin_name, parent, submitted_by,
//     checkpoint, submitted, finished) and the whole record as JSON (record).
//   - run_labels (key, value), run_inputs (uri): the label filters and lineage.
//   - attempts (attempt, start_us, end_us, gpu, cpu, memory_bytes): usage; end_us is
//     NULL for an attempt without an End, which counts up to the record's Finished.
//
// The child tables reference runs ON DELETE CASCADE. List orders by finished, uid,
// kind and workspace, newest first, and pages with an opaque cursor of those four.
// A lineage query (Query.Checkpoint) matches as a path prefix at a '/' boundary:
// "s3://b/model" matches "s3://b/model" and "s3://b/model/ckpt-1", not
// "s3://b/model2".
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// Kind is the kind of run a record is of: the kind of the document that ran.
type Kind string

// Kinds of run.
const (
	KindJob        Kind = "TrainingJob"
	KindExperiment Kind = "Experiment"
	KindPipeline   Kind = "Pipeline"
)

// Kinds are the kinds of run.
var Kinds = []Kind{KindJob, KindExperiment, KindPipeline}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// Origin kinds: what started a run (Origin.Kind).
const (
	OriginUser       = "User"       // submitted through the API, the CLI or an SDK
	OriginSchedule   = "Schedule"   // a schedule's firing
	OriginTrigger    = "Trigger"    // a trigger, on an event
	OriginPipeline   = "Pipeline"   // a pipeline run's step
	OriginExperiment = "Experiment" // an experiment's trial
)

// Origin is what started a run: a user, or a schedule, trigger, pipeline or experiment
// by name. Event is the trigger's event id; Step the pipeline step; Trial the
// experiment's trial number.
type Origin struct {
	Kind  string `json:"kind"`
	Name  string `json:"name,omitempty"`
	Event string `json:"event,omitempty"`
	Step  string `json:"step,omitempty"`
	Trial *int   `json:"trial,omitempty"`
}

// Attempt is one attempt of a job run: when it ran, where, and how it ended. Usage is
// counted from Start to End: the time the attempt held its replicas' resources.
type Attempt struct {
	Attempt int        `json:"attempt"`
	Start   time.Time  `json:"start"`
	End     *time.Time `json:"end,omitempty"`
	// Outcome is the phase the attempt ended in (Succeeded, Failed, Stopped) or
	// Restarting when it was recovered; Reason classifies a failure.
	Outcome string   `json:"outcome,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Message string   `json:"message,omitempty"`
	Nodes   []string `json:"nodes,omitempty"`
	// ResumedFrom is the checkpoint the attempt started from.
	ResumedFrom string `json:"resumedFrom,omitempty"`
}

// Demand is what a run's replicas hold together while an attempt runs.
type Demand struct {
	GPU         int64   `json:"gpu,omitempty"`
	CPU         float64 `json:"cpu,omitempty"`         // cores
	MemoryBytes int64   `json:"memoryBytes,omitempty"` // bytes
}

// Record is one finished run.
type Record struct {
	Workspace string `json:"workspace"`
	Kind      Kind   `json:"kind"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Phase is the terminal phase (Succeeded, Failed, Stopped...), Reason and Message
	// why.
	Phase   string            `json:"phase"`
	Reason  string            `json:"reason,omitempty"`
	Message string            `json:"message,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// SubmittedBy is the identity (API token name) that submitted the run, or that
	// owns the schedule, trigger or pipeline that started it.
	SubmittedBy string `json:"submittedBy,omitempty"`
	Origin      Origin `json:"origin"`
	// Parent is the uid of the run this one is a part of (a trial's experiment, a
	// step's pipeline run); empty for a top-level run.
	Parent string `json:"parent,omitempty"`
	// Submitted, Started and Finished are the run's times; Started is nil for a run
	// that never started.
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"`
	Finished  time.Time  `json:"finished"`
	// Image is the container image (Digest its digest where the backend reported it).
	Image  string `json:"image,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Inputs are the data URIs the run read; Checkpoint the last complete checkpoint it
	// wrote (for an experiment: its best trial's); Outputs other artifacts by name (a
	// pipeline's outputs, an experiment's best parameters are in Result).
	Inputs     []string          `json:"inputs,omitempty"`
	Checkpoint string            `json:"checkpoint,omitempty"`
	Outputs    map[string]string `json:"outputs,omitempty"`
	// Metrics are the final metrics (a job's last reported values, an experiment's best
	// objective under its metric's name).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Attempts are a job's attempts, in order; Demand what each held.
	Attempts []Attempt `json:"attempts,omitempty"`
	Demand   Demand    `json:"demand,omitzero"`
	// Spec is the document as it ran (JSON); Result the kind's final status (JSON).
	Spec   json.RawMessage `json:"spec,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Query selects records. Zero fields select everything; the result is newest first
// (by Finished, then UID), at most Limit (default 100, at most 1000) from the record
// after the cursor After (an opaque token from a previous page's Page.Next).
type Query struct {
	// Workspaces limits the records to these workspaces; empty is every workspace (the
	// API always sets it to what the caller may read).
	Workspaces []string
	Kind       Kind
	Name       string
	// Labels must all be on the record (key=value).
	Labels map[string]string
	Phase  string
	// FinishedAfter and FinishedBefore bound Finished: [after, before).
	FinishedAfter, FinishedBefore time.Time
	// OriginKind and OriginName select what started the run (OriginSchedule, "nightly").
	OriginKind, OriginName string
	// Parent selects the runs of an experiment or pipeline run by its uid.
	Parent string
	// Checkpoint selects runs whose Checkpoint starts with it, or whose Inputs hold a
	// URI that starts with it: lineage from a checkpoint or model URI to the runs that
	// wrote or read it. It matches as a path, at a '/' boundary: "s3://b/model" selects
	// "s3://b/model" and "s3://b/model/ckpt-1", not "s3://b/model2".
	Checkpoint string
	Limit      int
	After      string
}

// Page is one page of a query's records; Next is the cursor of the next page, empty on
// the last.
type Page struct {
	Records []Record `json:"records"`
	Next    string   `json:"next,omitempty"`
}

// UsageQuery sums the attempts' resource-hours. Workspaces and the time range select
// attempts that ran in [From, To) (an attempt is cut to the range); GroupByLabel, when
// set, groups by that label's value as well.
type UsageQuery struct {
	Workspaces   []string
	From, To     time.Time
	GroupByLabel string
}

// UsageRow is one workspace's (and label value's) use on one UTC day.
type UsageRow struct {
	Workspace string `json:"workspace"`
	// Day is the UTC date, YYYY-MM-DD.
	Day   string `json:"day"`
	Label string `json:"label,omitempty"`
	// GPUHours, CPUHours and MemoryGiBHours are resource × hours.
	GPUHours       float64 `json:"gpuHours"`
	CPUHours       float64 `json:"cpuHours"`
	MemoryGiBHours float64 `json:"memoryGiBHours"`
	// Runs counts the distinct runs whose attempts are in the row.
	Runs int `json:"runs"`
}

// ErrNotFound is returned by Get for a record that does not exist.
var ErrNotFound = errors.New("runs: no such record")

// Store keeps run records.
type Store interface {
	// Put writes r if no record with its (workspace, kind, uid) exists, and reports
	// whether it wrote it. A second Put of the same key changes nothing.
	Put(ctx context.Context, r Record) (bool, error)
	// Get reads one record.
	Get(ctx context.Context, workspace string, kind Kind, uid string) (Record, error)
	// List answers a query.
	List(ctx context.Context, q Query) (Page, error)
	// Usage sums resource-hours per workspace, day (and label value).
	Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error)
	// Delete removes the records of a name's runs (every uid when uid is empty) and
	// the runs whose Parent is one of them, and reports how many it removed.
	Delete(ctx context.Context, workspace string, kind Kind, name, uid string) (int, error)
	// Expire removes records that finished before cutoff and reports how many.
	Expire(ctx context.Context, cutoff time.Time) (int, error)
	// Close closes the database.
	Close() error
}
