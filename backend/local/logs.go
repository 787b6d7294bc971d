package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opendlc/opendlc/backend"
)

const (
	// maxLine is the longest record; longer lines are split so that one runaway line
	// cannot exhaust memory or stall the log.
	maxLine = 64 << 10
	// readChunk is how much of output.log one read asks for.
	readChunk = 256 << 10
	// indexEvery is how many records apart the entries of output.idx are.
	indexEvery = 1024
	// drainTimeout bounds how long, once a supervisor has ended, its output is waited
	// for while processes of its group still run (a process stuck in the kernel; the
	// replica itself, when someone killed only its supervisor).
	drainTimeout = 2 * time.Second
)

// streamName is the LogLine.Stream of every record: stdout and stderr go to one file,
// as Kubernetes does, so the two cannot be told apart.
const streamName = "stdout"

// FollowLogs calls fn for every record of the replica's output with a sequence number
// above afterSeq, in order, and keeps tailing until the replica has ended and its output
// is complete. An error from fn stops the follow and is returned as is.
//
// Records are derived from output.log alone, so every reader, in any worker process,
// numbers them the same: see nextRecord. Resuming after afterSeq starts from the nearest
// entry of output.idx, a sidecar index of byte offsets every indexEvery records that
// readers write as they go, so it costs at most indexEvery records of reading however
// long the log is.
//
// A record's Time is the modification time of output.log when the read that completed
// it returned: no earlier than the line was written, within a poll interval of it while
// following a running replica, and the time of the last write for a replica that had
// ended before it was read (the same on every read then).
func (b *Backend) FollowLogs(ctx context.Context, ref backend.GangRef, replica string, afterSeq int64, fn func(backend.LogLine) error) error {
	id := ref.ID()
	dir := b.gangDir(id)
	st, err := readState(dir)
	if err != nil {
		return err
	}
	found := false
	for _, r := range st.Spec.Replicas {
		found = found || r.Name == replica
	}
	if !found {
		return fmt.Errorf("local: gang %s has no replica %q", id, replica)
	}
	rdir := filepath.Join(dir, replica)
	t := &tail{rdir: rdir, replica: replica, afterSeq: max(afterSeq, 0), fn: fn}
	defer t.close()
	var drain time.Time
	for {
		// Decide whether the output is complete before reading: if it is now, this
		// read reaches its end.
		done, wake := b.outputDone(dir, rdir, &drain)
		if err := t.read(done); err != nil {
			return err
		}
		if done {
			return nil
		}
		timer := time.NewTimer(b.poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
		if !exists(filepath.Join(dir, stateFile)) {
			return fmt.Errorf("%w: %s was cleaned up while its logs were followed", backend.ErrGangNotFound, id)
		}
	}
}

// outputDone reports whether a replica's output can no longer grow, and otherwise a
// channel that closes when it may have (nil when there is nothing to wait on but
// time). drain remembers, across calls, since when the supervisor has been gone.
func (b *Backend) outputDone(dir, rdir string, drain *time.Time) (bool, <-chan struct{}) {
	if !exists(rdir) {
		// Not claimed: in a stopped gang it never will be.
		return exists(filepath.Join(dir, stoppedFile)), nil
	}
	pid := readPid(rdir)
	if pid == 0 {
		if exists(filepath.Join(rdir, exitFile)) {
			return true, nil // could not be started
		}
		if gangLocked(dir) {
			return false, nil // being started
		}
		if pid = readPid(rdir); pid == 0 {
			return true, nil // its worker died before starting it
		}
	}
	if c := b.child(rdir); c != nil {
		return false, c.done
	}
	marker := replicaMarker + "=" + rdir
	if supervisorAlive(pid, marker) {
		return false, nil
	}
	// The supervisor has ended (after its replica, and after killing the rest of its
	// group) or vanished. A member of the group may still be finishing a write.
	if !groupHasMarker(pid, marker) {
		return true, nil
	}
	if drain.IsZero() {
		*drain = time.Now()
	}
	return time.Since(*drain) >= drainTimeout, nil
}

// tail reads output.log incrementally and hands its records to fn.
type tail struct {
	rdir     string
	replica  string
	afterSeq int64
	fn       func(backend.LogLine) error

	f     *os.File
	idx   *seqIndex
	off   int64  // offset in output.log of buf[0]
	seq   int64  // records before buf[0]
	buf   []byte // read, not yet a record
	mtime time.Time
}

// read hands every record complete so far to fn; with final, the output is complete
// and a last line without a newline is a record too.
func (t *tail) read(final bool) error {
	if t.f == nil {
		f, err := os.Open(filepath.Join(t.rdir, logFile))
		if errors.Is(err, os.ErrNotExist) {
			return nil // not started (yet)
		}
		if err != nil {
			return fmt.Errorf("local: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("local: %w", err)
		}
		t.f = f
		t.idx = openIndex(filepath.Join(t.rdir, indexFile))
		t.seq, t.off = t.idx.lookup(t.afterSeq, fi.Size())
		if t.off > 0 {
			if _, err := f.Seek(t.off, io.SeekStart); err != nil {
				return fmt.Errorf("local: %w", err)
			}
		}
	}
	for {
		if cap(t.buf)-len(t.buf) < readChunk {
			t.buf = append(make([]byte, 0, len(t.buf)+readChunk+maxLine), t.buf...)
		}
		n, err := t.f.Read(t.buf[len(t.buf) : len(t.buf)+readChunk])
		if n > 0 {
			if fi, serr := t.f.Stat(); serr == nil {
				t.mtime = fi.ModTime().UTC()
			}
			t.buf = t.buf[:len(t.buf)+n]
			if err := t.records(false); err != nil {
				return err
			}
		}
		if err == io.EOF || (err == nil && n == 0) {
			break
		}
		if err != nil {
			return fmt.Errorf("local: %w", err)
		}
	}
	if final {
		return t.records(true)
	}
	return nil
}

// records hands the records in buf to fn, keeping what is not a record yet.
func (t *tail) records(final bool) error {
	data := t.buf
	defer func() { t.buf = t.buf[:copy(t.buf, data)] }()
	for {
		rec, n, last := nextRecord(data, final)
		if n == 0 {
			return nil
		}
		data = data[n:]
		t.seq++
		t.off += int64(n)
		// A last line without a newline is a record only because the output is
		// complete; it is no boundary to index.
		if t.seq%indexEvery == 0 && !last {
			t.idx.put(t.seq/indexEvery, t.off)
		}
		if t.seq <= t.afterSeq {
			continue
		}
		line := string(rec)
		if !utf8.ValidString(line) {
			// Records travel as JSON text; say where the bytes were not UTF-8.
			line = strings.ToValidUTF8(line, "\uFFFD")
		}
		if err := t.fn(backend.LogLine{Replica: t.replica, Stream: streamName, Seq: t.seq, Time: t.mtime, Line: line}); err != nil {
			return err
		}
	}
}

func (t *tail) close() {
	if t.f != nil {
		t.f.Close()
	}
	t.idx.close()
}

// nextRecord splits the next record off data, the unread rest of output.log from a
// record boundary. The rule depends on the bytes alone, so every reader splits the same
// way, whenever it reads:
//
//   - a newline within the first maxLine+1 bytes ends a record of at most maxLine
//     bytes; the newline belongs to no record;
//   - more than maxLine bytes without a newline: a record of the first maxLine bytes,
//     less a UTF-8 character cut by that boundary;
//   - otherwise the record is not complete yet, unless final (the output is complete):
//     then the rest is the last record.
//
// n is how many bytes the record takes (0: none yet); last marks a final partial line.
func nextRecord(data []byte, final bool) (rec []byte, n int, last bool) {
	if i := bytes.IndexByte(data[:min(len(data), maxLine+1)], '\n'); i >= 0 {
		return data[:i], i + 1, false
	}
	if len(data) > maxLine {
		cut := runeCut(data[:maxLine])
		return data[:cut], cut, false
	}
	if final && len(data) > 0 {
		return data, len(data), true
	}
	return nil, 0, false
}

// runeCut returns where to split b so that a multi-byte character at its end is not cut
// in two.
func runeCut(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) || i == 0 {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// seqIndex is output.idx: entry k (k >= 1), 16 bytes at offset 16(k-1), holds the byte
// offset in output.log at which record k*indexEvery+1 starts, and a check word, so that
// a torn or missing entry is detected rather than trusted. Records are numbered the same
// by every reader, so entries are too: readers write them as they pass, concurrently if
// need be, without coordination. It is only an accelerator: when it cannot be read or
// written, output.log is read from the start.
type seqIndex struct {
	path string
	f    *os.File // nil when the index cannot be opened
	have int64    // entries known to be in the file
}

const indexMagic = 0x6f70656e646c6331 // "opendlc1"

func indexCheck(k, off uint64) uint64 { return off ^ (k * 0x9e3779b97f4a7c15) ^ indexMagic }

func openIndex(path string) *seqIndex {
	x := &seqIndex{path: path}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return x
	}
	x.f = f
	if fi, err := f.Stat(); err == nil {
		x.have = fi.Size() / 16
	}
	return x
}

// lookup returns the last indexed boundary at or before record afterSeq+1: how many
// records precede it and its offset. logSize bounds what a valid entry can say.
func (x *seqIndex) lookup(afterSeq, logSize int64) (seq, off int64) {
	k := min(afterSeq/indexEvery, x.have)
	if x.f == nil {
		return 0, 0
	}
	var e [16]byte
	// An invalid entry (a writer died mid-write) is retried a few entries back.
	for tries := 0; k > 0 && tries < 16; k, tries = k-1, tries+1 {
		if _, err := x.f.ReadAt(e[:], (k-1)*16); err != nil {
			continue
		}
		o, check := binary.LittleEndian.Uint64(e[:8]), binary.LittleEndian.Uint64(e[8:])
		if check == indexCheck(uint64(k), o) && int64(o) <= logSize {
			return k * indexEvery, int64(o)
		}
	}
	return 0, 0
}

// put records that record k*indexEvery+1 starts at off.
func (x *seqIndex) put(k, off int64) {
	if x.f == nil || k <= x.have {
		return
	}
	if k != x.have+1 {
		return // never leave a hole: entries are written in order
	}
	var e [16]byte
	binary.LittleEndian.PutUint64(e[:8], uint64(off))
	binary.LittleEndian.PutUint64(e[8:], indexCheck(uint64(k), uint64(off)))
	if _, err := x.f.WriteAt(e[:], (k-1)*16); err != nil {
		x.f.Close()
		x.f = nil
		return
	}
	x.have = k
}

func (x *seqIndex) close() {
	if x != nil && x.f != nil {
		x.f.Close()
	}
}
