package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/logarchive"
)

// JobHistory is what a job keeps after `dlc delete` and what `--purge` removes: the
// record of deleted runs (the DLC_DELETED_JOBS bucket), and the run's events, log
// records and log archive. The front end sets it (Jobs.SetHistory); without it, every
// delete purges.
type JobHistory struct {
	deleted jetstream.KeyValue
	ev      *dlcjs.Client
	archive *logarchive.Store

	// cache mirrors the bucket's keys, kept by a watch (watchDeleted), so that reading a
	// job does not depend on NATS answering: while NATS is down, reads answer from the
	// last known state.
	mu    sync.RWMutex
	cache map[string]bool
	ready bool // the watch has delivered the bucket's initial keys
}

// NewJobHistory opens the deleted-runs bucket (created by jetstream.EnsureStreams).
// archive, when set, is where purged runs' log archives are deleted.
func NewJobHistory(ctx context.Context, ev *dlcjs.Client, archive *logarchive.Store) (*JobHistory, error) {
	kv, err := ev.JetStream().KeyValue(ctx, dlcjs.DeletedJobsBucket)
	if err != nil {
		return nil, fmt.Errorf("service: open bucket %s: %w", dlcjs.DeletedJobsBucket, err)
	}
	h := &JobHistory{deleted: kv, ev: ev, archive: archive, cache: map[string]bool{}}
	go h.watchDeleted()
	return h, nil
}

// watchDeleted keeps the cache of deleted runs. It lives as long as the process's NATS
// connection; the watch resumes by itself after NATS comes back. If the watch cannot
// start, isDeleted reads the bucket on every call.
func (h *JobHistory) watchDeleted() {
	w, err := h.deleted.WatchAll(context.Background())
	if err != nil {
		return
	}
	for e := range w.Updates() {
		h.mu.Lock()
		switch {
		case e == nil:
			h.ready = true
		case e.Operation() == jetstream.KeyValuePut:
			h.cache[e.Key()] = true
		default:
			delete(h.cache, e.Key())
		}
		h.mu.Unlock()
	}
}

// cached answers from the cache: deleted, and whether the cache knew.
func (h *JobHistory) cached(key string) (deleted, known bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.cache[key], h.ready || h.cache[key]
}

// deletedRun is the record of a deleted run.
type deletedRun struct {
	Workspace string    `json:"workspace"`
	Name      string    `json:"name"`
	UID       string    `json:"uid"`
	DeletedAt time.Time `json:"deletedAt"`
}

func deletedKey(ws, uid string) string { return ws + "." + uid }

// markDeleted records that a run was deleted.
func (h *JobHistory) markDeleted(ctx context.Context, ws, name, uid string) error {
	b, err := json.Marshal(deletedRun{Workspace: ws, Name: name, UID: uid, DeletedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	if _, err := h.deleted.Put(ctx, deletedKey(ws, uid), b); err != nil {
		return fmt.Errorf("record the deletion of job %s/%s: %w", ws, name, err)
	}
	h.mu.Lock()
	h.cache[deletedKey(ws, uid)] = true
	h.mu.Unlock()
	return nil
}

// isDeleted reports whether a run was deleted.
func (h *JobHistory) isDeleted(ctx context.Context, ws, uid string) (bool, error) {
	if uid == "" {
		return false, nil
	}
	if deleted, known := h.cached(deletedKey(ws, uid)); known {
		return deleted, nil
	}
	_, err := h.deleted.Get(ctx, deletedKey(ws, uid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the deleted jobs: %w", err)
	}
	return true, nil
}

// forget drops the deletion records of a run's ids (once the run itself is purged).
func (h *JobHistory) forget(ctx context.Context, ws string, uids ...string) error {
	for _, uid := range uids {
		if uid == "" {
			continue
		}
		if err := h.deleted.Purge(ctx, deletedKey(ws, uid)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		h.mu.Lock()
		delete(h.cache, deletedKey(ws, uid))
		h.mu.Unlock()
	}
	return nil
}

// purge removes one run's status and metric events and log records from the streams,
// and its log archive (archiveDir, when set). Other runs of the same name keep theirs.
func (h *JobHistory) purge(ctx context.Context, ws, name, uid, archiveDir string) error {
	ofRun := func(data []byte) bool {
		var m struct {
			UID  string `json:"uid"`
			Data struct {
				UID string `json:"uid"`
			} `json:"data"`
		}
		return json.Unmarshal(data, &m) == nil && (m.UID == uid || m.Data.UID == uid)
	}
	if _, err := h.ev.DeleteWhere(ctx, dlcjs.LogsStream, events.JobLogsFilter(ws, name), ofRun); err != nil {
		return fmt.Errorf("purge the logs of job %s/%s: %w", ws, name, err)
	}
	if _, err := h.ev.DeleteWhere(ctx, dlcjs.EventsStream, fmt.Sprintf("dlc.%s.job.%s.*", ws, name), ofRun); err != nil {
		return fmt.Errorf("purge the events of job %s/%s: %w", ws, name, err)
	}
	if archiveDir != "" && h.archive != nil {
		if _, err := h.archive.Delete(ctx, archiveDir); err != nil {
			return fmt.Errorf("purge the log archive of job %s/%s: %w", ws, name, err)
		}
	}
	return nil
}
