package local

import (
	"path/filepath"

	"github.com/opendlc/opendlc/backend"
)

// GangChanges implements backend.ChangeNotifier: the returned channel is closed when a
// replica of the gang ends, that is when its supervisor, having recorded how the
// replica ended, is gone. The supervisors this Backend started are its children and
// are reaped (supervisor.go); those it adopted from an earlier worker process are
// waited on through a pidfd (exitNotice), from the first call for their gang on. A
// replica starting needs no notice: Launch returns once its replicas run. Where the
// system gives no pidfd, an adopted replica's end is seen by the watcher's slow
// timer instead. The channel may close for a change the watcher has already seen;
// it observes again and compares.
func (b *Backend) GangChanges(ref backend.GangRef) <-chan struct{} {
	id := ref.ID()
	b.mu.Lock()
	ch, ok := b.gangWaiters[id]
	if !ok {
		ch = make(chan struct{})
		b.gangWaiters[id] = ch
	}
	b.mu.Unlock()
	b.adoptSupervisors(id)
	return ch
}

// notifyGang closes the channel GangChanges gave out for gang id, if any.
func (b *Backend) notifyGang(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.gangWaiters[id]; ok {
		close(ch)
		delete(b.gangWaiters, id)
	}
}

// gangIDOf is the gang id of a replica directory (<state>/<gang>/<replica>).
func gangIDOf(rdir string) string { return filepath.Base(filepath.Dir(rdir)) }

// adoptSupervisors starts waiting for the end of every running supervisor of gang id
// that this Backend did not start and does not wait for yet.
func (b *Backend) adoptSupervisors(id string) {
	dir := b.gangDir(id)
	st, err := readState(dir)
	if err != nil {
		return
	}
	for _, r := range st.Spec.Replicas {
		rdir := filepath.Join(dir, r.Name)
		pid := readPid(rdir)
		if pid == 0 || exists(filepath.Join(rdir, exitFile)) {
			continue // not started, or ending: the next observation sees it
		}
		b.mu.Lock()
		_, started := b.children[rdir]
		waiting := b.adopted[rdir]
		if !started && !waiting {
			b.adopted[rdir] = true
		}
		b.mu.Unlock()
		if started || waiting {
			continue
		}
		marker := replicaMarker + "=" + rdir
		if !exitNotice(pid, func() bool { return supervisorAlive(pid, marker) }, func() {
			b.mu.Lock()
			delete(b.adopted, rdir)
			b.mu.Unlock()
			b.notifyGang(id)
		}) {
			b.mu.Lock()
			delete(b.adopted, rdir)
			b.mu.Unlock()
		}
	}
}
