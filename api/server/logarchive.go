package server

import (
	"encoding/json"
	"net/http"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/logarchive"
)

// WithLogArchive reads a finished job's logs from its archive in S3 (status.logArchive)
// rather than from the log stream, which drops them after its retention. Default: the
// stream only.
func WithLogArchive(store *logarchive.Store) Option {
	return func(o *Options) { o.LogArchive = store }
}

// archivedLogs answers a finished job's logs from its archive, in the format the
// stream's are answered in (one events.LogRecord per JSON line; every replica's
// merged in time order, or one replica's, `<role>-<index>`). It returns false, having
// written nothing, when the job runs, was not archived, or its archive is gone: the
// caller reads the stream. follow changes nothing: a finished job's log has ended.
func (s *Server) archivedLogs(w http.ResponseWriter, r *http.Request, view api.Job, replica string) (bool, error) {
	store, dir := s.opts.LogArchive, view.Status.LogArchive
	if store == nil || dir == "" || !view.Status.Phase.Terminal() {
		return false, nil
	}
	if replica != "" {
		role, index, _ := splitReplica(view, replica)
		replica = logarchive.ReplicaName(role, index)
	}
	ctx := r.Context()
	replicas, err := store.Replicas(ctx, dir)
	if err != nil {
		s.opts.Logger.Warn("could not read the log archive; reading the stream", "job", view.Spec.Metadata.Name, "dir", dir, "error", err)
		return false, nil
	}
	if len(replicas) == 0 {
		return false, nil
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	err = store.Read(ctx, dir, replica, func(rec events.LogRecord) error { return enc.Encode(rec) })
	if err != nil && ctx.Err() == nil {
		s.opts.Logger.Warn("log archive read ended with an error", "job", view.Spec.Metadata.Name, "dir", dir, "error", err)
	}
	return true, nil
}
