package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// MetricObjects reads the S3 objects of metrics file collectors with s3:// paths
// (checkpoint.Store).
type MetricObjects interface {
	// StatObject describes the object; found is false when there is none.
	StatObject(ctx context.Context, uri string) (info checkpoint.ObjectInfo, found bool, err error)
	// ReadObject returns its content.
	ReadObject(ctx context.Context, uri string) ([]byte, error)
}

// DefaultMetricFilePoll is how often a metrics file is read while its replica runs.
const DefaultMetricFilePoll = time.Second

// maxMetricFileSize bounds what one read of a metrics file takes in: a larger file is
// read no more (a warning says so).
const maxMetricFileSize = 64 << 20

// fileTail reads one metrics file of an attempt's first replica: new rows while it runs
// and once more when it has ended. Rows are numbered by their place in the file; each
// is published once as a metric event with an id made of the job, attempt, replica,
// collector and row, and a restarted tail starts after the last row the event stream
// holds for them, so a worker restart neither repeats nor loses a row.
type fileTail struct {
	a         *JobActivities
	in        ForwardLogsInput
	replica   schemas.ReplicaStatus
	index     int // the collector's place in in.MetricFiles
	collector schemas.FileCollector
	// path is the file on the worker's file system (or a pattern of files, of which
	// current is the newest), or the S3 object (s3://).
	path    string
	current string
	// dir is the working directory a local path must stay in, symbolic links resolved.
	dir string
	// onValues hands each published row's values to the forwarding's result.
	onValues func(events.Metrics)

	published int64 // rows published so far
	size      int64
	mod       time.Time
	etag      string
	warned    string
}

// fileTails reads a file on the worker's file system; s3 an S3 object.
func (t *fileTail) s3() bool { return strings.HasPrefix(t.path, "s3://") }

// source is the collector's MetricData.Source.
func (t *fileTail) source() string { return "file:" + t.collector.Path }

// metricFileTails are the tails of the first replica's metrics files; nil when the
// job has none, the forwarder does not forward the first replica, or the backend keeps
// no file the worker can read (a warning says so).
func (a *JobActivities) metricFileTails(ctx context.Context, in ForwardLogsInput, onValues func(events.Metrics)) []*fileTail {
	if len(in.MetricFiles) == 0 || len(in.Replicas) == 0 {
		return nil
	}
	dirs, local := a.Backend.(backend.WorkingDirs)
	wd, readable := "", false
	if local {
		wd, readable = dirs.WorkingDir(in.WorkingDir)
	}
	out := make([]*fileTail, 0, len(in.MetricFiles))
	for i, c := range in.MetricFiles {
		t := &fileTail{a: a, in: in, replica: in.Replicas[0], index: i, collector: c, path: c.Path, onValues: onValues}
		switch {
		case strings.HasPrefix(c.Path, "s3://"):
			if a.MetricObjects == nil {
				warn(ctx, "this worker reads no S3 objects: metrics file not read", "job", in.Ref.Job, "file", c.Path)
				continue
			}
		case strings.HasPrefix(c.Path, "/tmp/"):
			tmps, ok := a.Backend.(backend.ReplicaTmpDirs)
			dir := ""
			if ok {
				dir, ok = tmps.ReplicaTmpDir(in.Ref, in.Replicas[0].Name)
			}
			if !ok {
				warn(ctx, "metrics files in a replica's /tmp are read on the local backend only: not read",
					"job", in.Ref.Job, "file", c.Path, "backend", a.Backend.Name())
				continue
			}
			t.dir, t.path = dir, filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(c.Path, "/tmp/")))
		case !local:
			warn(ctx, "metrics files in the working directory are read on the local backend only: not read",
				"job", in.Ref.Job, "file", c.Path, "backend", a.Backend.Name())
			continue
		case !readable:
			warn(ctx, "metrics files in the working directory are not read in the local sandbox (use an s3:// path): not read",
				"job", in.Ref.Job, "file", c.Path)
			continue
		default:
			t.dir, t.path = wd, filepath.Join(wd, filepath.FromSlash(c.Path))
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// run reads the file every poll until stop is closed (the replica's output is drained),
// then once more, to the end. A cancelled ctx ends it without the last read.
func (t *fileTail) run(ctx context.Context, stop <-chan struct{}) error {
	if err := t.resume(ctx); err != nil {
		return err
	}
	poll := t.a.MetricFilePoll
	if poll <= 0 {
		poll = DefaultMetricFilePoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return t.read(ctx, true)
		case <-tick.C:
			if err := t.read(ctx, false); err != nil {
				return err
			}
		}
	}
}

// resume finds the last row of this file the event stream holds for this attempt. An
// S3 object outside the workspace's storage is refused (the launch refuses such a job
// already; this guards a job whose workspace's locations changed since).
func (t *fileTail) resume(ctx context.Context) error {
	if t.s3() {
		ok, err := t.a.mayRead(ctx, t.in.Ref.Workspace, t.path)
		if err != nil {
			return fmt.Errorf("storage of workspace %s: %w", t.in.Ref.Workspace, err)
		}
		if !ok {
			return invalidSpec(fmt.Errorf("metrics file %s is outside workspace %s's storage", t.path, t.in.Ref.Workspace))
		}
	}
	if t.a.Events == nil {
		return errors.New("job activities have no event reader: metrics files cannot be read without repeating rows")
	}
	src := t.source()
	err := t.a.Events.ReadUntil(ctx, t.a.EventStream, events.JobMetricsSubject(t.in.Ref.Workspace, t.in.Ref.Job), nil,
		func(_ string, data []byte) error {
			var ev events.Event
			if json.Unmarshal(data, &ev) != nil || ev.Type != events.TypeJobMetric {
				return nil //nolint:nilerr // not a metric event: skip it
			}
			var d events.MetricData
			if json.Unmarshal(ev.Data, &d) != nil {
				return nil //nolint:nilerr // unreadable: skip it
			}
			if d.UID == t.in.UID && d.Attempt == t.in.Ref.Attempt && d.Replica == t.replica.Name && d.Source == src {
				t.published = max(t.published, d.Seq)
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("read where metrics file %s stops: %w", t.collector.Path, err)
	}
	return nil
}

// read publishes the rows of the file after the last one published. Unless final, a
// file unchanged since the last read is not read again, and a last line still being
// written waits. A file not written since the attempt started is another run's and is
// left alone.
func (t *fileTail) read(ctx context.Context, final bool) error {
	st, found, err := t.stat(ctx)
	if err != nil {
		t.warnOnce(ctx, "metrics file cannot be read", err)
		return nil
	}
	if !found {
		return nil
	}
	if !t.in.Since.IsZero() && st.Modified.Before(t.in.Since) {
		return nil
	}
	if !final && st.Size == t.size && st.Modified.Equal(t.mod) && st.ETag == t.etag {
		return nil
	}
	if st.Size > maxMetricFileSize {
		t.warnOnce(ctx, "metrics file too large: no longer read", fmt.Errorf("%d bytes, at most %d", st.Size, maxMetricFileSize))
		return nil
	}
	data, err := t.content(ctx)
	if err != nil {
		t.warnOnce(ctx, "metrics file cannot be read", err)
		return nil
	}
	rows, bad, err := parseMetricFile(t.collector.Format, data, final)
	if errors.Is(err, errIncomplete) && !final {
		return nil // read again at the next poll
	}
	if err != nil {
		t.warnOnce(ctx, "metrics file cannot be read", err)
		return nil
	}
	if bad != nil {
		t.warnOnce(ctx, "rows of a metrics file left out", bad)
	}
	t.size, t.mod, t.etag = st.Size, st.Modified, st.ETag
	var msgs []events.Msg
	var vals []events.Metrics
	last := t.published
	for _, r := range rows {
		if r.N <= t.published {
			continue
		}
		last = r.N
		if len(r.Values) == 0 {
			continue
		}
		m, err := t.msg(r)
		if err != nil {
			t.warnOnce(ctx, "metrics row not published", err)
			continue
		}
		msgs = append(msgs, m)
		vals = append(vals, r.Values)
	}
	if len(msgs) > 0 {
		if err := t.a.Publisher.Publish(ctx, msgs...); err != nil {
			return fmt.Errorf("publish rows of metrics file %s: %w", t.collector.Path, err)
		}
	}
	t.published = last
	for _, v := range vals {
		t.onValues(v)
	}
	return nil
}

// stat describes the file or object; found is false while there is none.
func (t *fileTail) stat(ctx context.Context) (checkpoint.ObjectInfo, bool, error) {
	if t.s3() {
		return t.a.MetricObjects.StatObject(ctx, t.path)
	}
	t.current = t.path
	if strings.ContainsAny(t.path, "*?[") {
		return t.newestMatch()
	}
	return t.statLocal(t.path)
}

// statLocal describes the local file p, which must be a regular file inside the
// working directory once symbolic links are resolved: a link out of it is refused, so
// a job cannot have the worker read another file of the host.
func (t *fileTail) statLocal(p string) (checkpoint.ObjectInfo, bool, error) {
	resolved, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint.ObjectInfo{}, false, nil
	}
	if err != nil {
		return checkpoint.ObjectInfo{}, false, err
	}
	dir, err := filepath.EvalSymlinks(t.dir)
	if err != nil {
		return checkpoint.ObjectInfo{}, false, err
	}
	if rel, err := filepath.Rel(dir, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return checkpoint.ObjectInfo{}, false, fmt.Errorf("%s leads out of the working directory (to %s)", p, resolved)
	}
	st, err := os.Stat(resolved)
	if err != nil {
		return checkpoint.ObjectInfo{}, false, err
	}
	if !st.Mode().IsRegular() {
		return checkpoint.ObjectInfo{}, false, fmt.Errorf("%s is not a regular file", p)
	}
	t.current = resolved
	return checkpoint.ObjectInfo{Size: st.Size(), Modified: st.ModTime(), ETag: resolved}, true, nil
}

// newestMatch makes current the most recently modified file the pattern matches (the
// Trainer's newest checkpoint-N/trainer_state.json; of two as new, the last by name).
func (t *fileTail) newestMatch() (checkpoint.ObjectInfo, bool, error) {
	matches, err := filepath.Glob(t.path)
	if err != nil {
		return checkpoint.ObjectInfo{}, false, err
	}
	var best checkpoint.ObjectInfo
	found := false
	newest := ""
	for _, m := range matches { // Glob sorts them
		st, ok, err := t.statLocal(m)
		if err != nil || !ok {
			continue // removed meanwhile (save_total_limit), a directory, or a link out
		}
		if !found || !st.Modified.Before(best.Modified) {
			best, found, newest = st, true, t.current
		}
	}
	t.current = newest
	return best, found, nil
}

// content reads the whole file or object.
func (t *fileTail) content(ctx context.Context) ([]byte, error) {
	if t.s3() {
		return t.a.MetricObjects.ReadObject(ctx, t.path)
	}
	return os.ReadFile(t.current)
}

// msg is the metric event of row r.
func (t *fileTail) msg(r metricRow) (events.Msg, error) {
	id := fmt.Sprintf("%s:a%d:%s:f%d:%d", t.in.UID, t.in.Ref.Attempt, t.replica.Name, t.index, r.N)
	ev, err := events.New(id, events.TypeJobMetric, t.in.Ref.Workspace,
		events.JobSource(t.in.Ref.Workspace, t.in.Ref.Job), t.in.Ref.Job, time.Now(),
		events.MetricData{Job: t.in.Ref.Job, UID: t.in.UID, Attempt: t.in.Ref.Attempt, Replica: t.replica.Name,
			Seq: r.N, Values: r.Values, Source: t.source()})
	if err != nil {
		return events.Msg{}, err
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return events.Msg{}, err
	}
	return events.Msg{Subject: events.JobMetricsSubject(t.in.Ref.Workspace, t.in.Ref.Job), ID: id, Data: data}, nil
}

// warnOnce warns about a problem with the file, once per different message.
func (t *fileTail) warnOnce(ctx context.Context, msg string, err error) {
	if s := msg + err.Error(); s != t.warned {
		t.warned = s
		warn(ctx, msg, "job", t.in.Ref.Job, "file", t.collector.Path, "error", err)
	}
}
