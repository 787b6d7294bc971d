package workers

import (
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/logarchive"
	"github.com/opendlc/opendlc/storage"
	"github.com/opendlc/opendlc/workflows"
)

// RegisterLogArchiveActivities registers the log archive's activity (ArchiveLogs).
func RegisterLogArchiveActivities(r ActivityRegistry, a *activities.LogArchiveActivities) {
	r.RegisterActivityWithOptions(a.ArchiveLogs, activity.RegisterOptions{Name: workflows.ActivityArchiveLogs})
}

// registerLogArchive registers ArchiveLogs on the worker's S3 and log stream.
func registerLogArchive(r ActivityRegistry, cfg Config, workspaces storage.Registry) error {
	archive, err := logarchive.New(cfg.S3)
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	root := cfg.LogArchiveRoot
	if root == "" {
		root = cfg.StorageRoot
	}
	RegisterLogArchiveActivities(r, &activities.LogArchiveActivities{
		Logs: cfg.Events, Stream: jetstream.LogsStream, Archive: archive,
		Storage: &storage.Policy{Root: cfg.StorageRoot, Workspaces: workspaces}, Root: root,
	})
	return nil
}
