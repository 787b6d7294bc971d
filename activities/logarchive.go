package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"go.temporal.io/sdk/activity"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/logarchive"
	"github.com/opendlc/opendlc/storage"
)

// LogReader reads a stream back (jetstream.Client).
type LogReader interface {
	// ReadUntil delivers, in stream order, every message of stream on filter that is
	// stored when it starts (done nil).
	ReadUntil(ctx context.Context, stream, filter string, done func() bool, fn func(subject string, data []byte) error) error
}

// LogArchiver writes one replica's records to the archive (logarchive.Store).
type LogArchiver interface {
	Write(ctx context.Context, dir, replica string, recs []events.LogRecord) (string, error)
}

// LogArchiveActivities archive a finished job's logs to S3 (package logarchive).
type LogArchiveActivities struct {
	// Logs reads the log stream (Stream).
	Logs   LogReader
	Stream string
	// Archive writes the archive objects.
	Archive LogArchiver
	// Storage gives a workspace's locations: the archive goes under the first.
	Storage StorageLocations
	// Root, s3://bucket[/prefix], gives a workspace whose locations are unrestricted
	// the location Root/<workspace>/. Empty: such a workspace's logs are not archived.
	Root string
}

// ArchiveLogsInput names the job run whose logs to archive.
type ArchiveLogsInput struct {
	Workspace string `json:"workspace"`
	Job       string `json:"job"`
	UID       string `json:"uid"`
}

// ArchiveLogsResult says where the logs went: Dir is the archive's URI
// (<location>logs/<job>/<uid>/), empty when nothing was archived (no lines, or no
// location); Replicas and Lines count what was written.
type ArchiveLogsResult struct {
	Dir      string `json:"dir,omitempty"`
	Replicas int    `json:"replicas,omitempty"`
	Lines    int    `json:"lines,omitempty"`
}

// ArchiveLogs reads every log record of a job run from the log stream and writes each
// replica's records to the workspace's location, gzip-compressed JSON lines. It is
// idempotent: a retry writes the same objects again.
func (a *LogArchiveActivities) ArchiveLogs(ctx context.Context, in ArchiveLogsInput) (ArchiveLogsResult, error) {
	defer keepAlive(ctx)()
	loc, ok, err := a.location(ctx, in.Workspace)
	if err != nil || !ok {
		return ArchiveLogsResult{}, err
	}
	byReplica := map[string][]events.LogRecord{}
	lines := 0
	err = a.Logs.ReadUntil(ctx, a.Stream, events.JobLogsFilter(in.Workspace, in.Job), nil, func(_ string, data []byte) error {
		var rec events.LogRecord
		if json.Unmarshal(data, &rec) != nil || rec.UID != in.UID {
			return nil //nolint:nilerr // another run's record, or not a record: not this archive's
		}
		name := logarchive.ReplicaName(rec.Role, rec.Index)
		byReplica[name] = append(byReplica[name], rec)
		lines++
		return nil
	})
	if err != nil {
		return ArchiveLogsResult{}, fmt.Errorf("archive logs of %s/%s: read the log stream: %w", in.Workspace, in.Job, err)
	}
	if lines == 0 {
		return ArchiveLogsResult{}, nil
	}
	dir := logarchive.Dir(loc, in.Job, in.UID)
	names := make([]string, 0, len(byReplica))
	for name := range byReplica {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := a.Archive.Write(ctx, dir, name, byReplica[name]); err != nil {
			return ArchiveLogsResult{}, fmt.Errorf("archive logs of %s/%s: %w", in.Workspace, in.Job, err)
		}
	}
	activity.GetLogger(ctx).Info("archived logs", "job", in.Job, "dir", dir, "replicas", len(names), "lines", lines)
	return ArchiveLogsResult{Dir: dir, Replicas: len(names), Lines: lines}, nil
}

// location is where a workspace's archives go: its first location, else Root/<ws>/;
// false when it has neither.
func (a *LogArchiveActivities) location(ctx context.Context, ws string) (storage.Location, bool, error) {
	if a.Storage != nil {
		locs, err := a.Storage.Locations(ctx, ws)
		if err != nil {
			return storage.Location{}, false, err
		}
		if len(locs) > 0 {
			return locs[0], true, nil
		}
	}
	if a.Root == "" {
		return storage.Location{}, false, nil
	}
	loc, err := storage.DefaultLocation(a.Root, ws)
	if err != nil {
		return storage.Location{}, false, invalidSpec(fmt.Errorf("log archive root: %w", err))
	}
	return loc, true, nil
}
