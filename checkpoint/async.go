package checkpoint

import (
	"context"
	"maps"
)

// Pending is a checkpoint that SaveAsync is saving in the background.
type Pending struct {
	// URI and Step say which checkpoint is being saved.
	URI  string
	Step int64

	done chan struct{}
	m    Manifest
	err  error
}

// Done is closed once the save has ended, whether it succeeded or not.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait blocks until the save has ended and returns its error: nil means the manifest
// is written and the checkpoint complete.
func (p *Pending) Wait() error {
	<-p.done
	return p.err
}

// Manifest is the saved checkpoint's manifest, with Ref set. It is the zero Manifest
// until Wait has returned nil.
func (p *Pending) Manifest() Manifest {
	select {
	case <-p.done:
		return p.m
	default:
		return Manifest{}
	}
}

// SaveAsync saves the checkpoint of step under uri in the background, as Save does
// (every file, then the manifest), and returns at once: training goes on while the
// checkpoint uploads. The returned Pending reports when the save has ended and how.
//
// Saves to one location are queued: each starts once the one queued before it has
// ended, successfully or not, so at most one save per location is in flight and
// manifests appear in the order of the calls. A newer step therefore never completes
// before an older one queued earlier, and Prune, which leaves alone incomplete steps
// newer than the newest complete checkpoint, never deletes a save in progress. Saves to
// different locations run in parallel. A failed save does not stop the ones queued
// after it; waiting for the last Pending of a location waits for all of them.
//
// ctx bounds the upload, not the call: cancelling it aborts the saves that have not
// ended, which then leave at most an incomplete step (no manifest) behind. SaveAsync
// copies the files map, not the contents: the caller must not modify the byte slices
// until the save has ended. Each queued save holds its files in memory until it ends.
func (s *Store) SaveAsync(ctx context.Context, uri string, step int64, files map[string][]byte, metrics map[string]float64) *Pending {
	p := &Pending{URI: uri, Step: step, done: make(chan struct{})}
	bucket, prefix, err := ParseURI(uri)
	if err != nil {
		p.err = err
		close(p.done)
		return p
	}
	key := bucket + "/" + prefix
	files, metrics = maps.Clone(files), maps.Clone(metrics)

	s.asyncMu.Lock()
	if s.queued == nil {
		s.queued = map[string]*Pending{}
	}
	prev := s.queued[key]
	s.queued[key] = p
	s.asyncMu.Unlock()

	go func() {
		if prev != nil {
			<-prev.done // even when ctx is done: this save must not overtake prev
		}
		p.m, p.err = s.Save(ctx, uri, step, files, metrics)
		s.asyncMu.Lock()
		if s.queued[key] == p {
			delete(s.queued, key)
		}
		s.asyncMu.Unlock()
		close(p.done)
	}()
	return p
}
