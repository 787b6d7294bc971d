package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/opendlc/opendlc/activities"
)

// logRecord is one line of output.log.
type logRecord struct {
	Stream string    `json:"stream"`
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Line   string    `json:"line"`
}

// FollowLogs calls fn for every line of the replica with a sequence number above
// afterSeq, in order, and keeps tailing until the replica has ended and its output is
// drained. It works for replicas a previous worker process started too: their output
// ends where that worker died. An error from fn stops the follow and is returned as is.
func (b *Backend) FollowLogs(ctx context.Context, ref activities.GangRef, replica string, afterSeq int64, fn func(activities.LogLine) error) error {
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
	t := tail{path: filepath.Join(rdir, logFile), replica: replica, afterSeq: afterSeq, fn: fn}
	defer t.close()
	for {
		// Decide whether the replica is over before reading: exit.json is written after
		// the last record, so if it exists now, this read reaches the end of the log.
		over, wake := b.logsOver(id, dir, rdir)
		if err := t.read(); err != nil {
			return err
		}
		if over {
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
			return fmt.Errorf("%w: %s was cleaned up while its logs were followed", activities.ErrGangNotFound, id)
		}
	}
}

// logsOver reports whether a replica's log can no longer grow, and otherwise a channel
// that closes when it ends (nil for processes this Backend does not own).
func (b *Backend) logsOver(id, dir, rdir string) (bool, <-chan struct{}) {
	if exists(filepath.Join(rdir, exitFile)) {
		return true, nil
	}
	// Disk before memory, as in replicaStatus.
	claimed := exists(rdir)
	if p, claimedHere := b.inMemory(id, filepath.Base(rdir)); p != nil {
		return false, p.done
	} else if claimedHere {
		return false, nil // being started
	}
	// Claimed but not by us and not ended: lost with the previous worker. Or never
	// started in a stopped gang: it never will be.
	return claimed || exists(filepath.Join(dir, stoppedFile)), nil
}

// tail reads output.log incrementally, handing complete records to fn.
type tail struct {
	path     string
	replica  string
	afterSeq int64
	fn       func(activities.LogLine) error

	f       *os.File
	pending []byte // a record whose end is not written yet
	chunk   []byte
}

// read hands every complete record written so far to fn.
func (t *tail) read() error {
	if t.f == nil {
		f, err := os.Open(t.path)
		if errors.Is(err, os.ErrNotExist) {
			return nil // not started yet
		}
		if err != nil {
			return fmt.Errorf("local: %w", err)
		}
		t.f, t.chunk = f, make([]byte, 256<<10)
	}
	for {
		n, err := t.f.Read(t.chunk)
		if n > 0 {
			t.pending = append(t.pending, t.chunk[:n]...)
			if err := t.deliver(); err != nil {
				return err
			}
		}
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("local: %w", err)
		}
	}
}

// deliver hands the complete records in pending to fn and keeps the rest.
func (t *tail) deliver() error {
	data := t.pending
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		data = data[i+1:]
		var rec logRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("local: %s: corrupt record: %w", t.path, err)
		}
		if rec.Seq <= t.afterSeq {
			continue
		}
		t.afterSeq = rec.Seq
		if err := t.fn(activities.LogLine{Replica: t.replica, Stream: rec.Stream, Seq: rec.Seq, Time: rec.Time, Line: rec.Line}); err != nil {
			t.pending = append(t.pending[:0], data...)
			return err
		}
	}
	t.pending = append(t.pending[:0], data...)
	return nil
}

func (t *tail) close() {
	if t.f != nil {
		t.f.Close()
	}
}
