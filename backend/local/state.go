package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Names of the files in a gang's state directory (see the package comment). The
// supervisor script writes pidFile, logFile, exitTmpFile and exitFile itself, under
// these names.
const (
	stateFile   = "gang.json"
	stoppedFile = "stopped"
	lockFile    = ".lock"
	pidFile     = "pid"
	logFile     = "output.log"
	indexFile   = "output.idx"
	exitFile    = "exit"
	exitTmpFile = "exit.tmp"
)

// gangState is gang.json.
type gangState struct {
	Spec backend.GangSpec `json:"spec"`
	// Ports are the named ports allocated at the first Launch, reused by later ones so
	// every replica of the gang agrees on them.
	Ports map[string]int `json:"ports,omitempty"`
}

// readState reads gang.json; a gang without one is backend.ErrGangNotFound.
func readState(dir string) (gangState, error) {
	var st gangState
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("%w: %s", backend.ErrGangNotFound, filepath.Base(dir))
	}
	if err != nil {
		return st, fmt.Errorf("local: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("local: %s: %w", filepath.Join(dir, stateFile), err)
	}
	return st, nil
}

// sameSpec compares specs by their JSON form, which is what is recorded and what
// survives a round trip (resource quantities, for one, compare unequal in memory after
// one).
func sameSpec(a, b backend.GangSpec) (bool, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return false, fmt.Errorf("local: %w", err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, fmt.Errorf("local: %w", err)
	}
	return bytes.Equal(ja, jb), nil
}

// exitRecord is a replica's exit file: how it ended. The supervisor writes it (as
// exit.tmp, then renamed) once the replica's main process has ended, so its output is
// all in output.log by then. The worker writes it only when the replica could not be
// started, and when Stop had to kill a supervisor that would not finish.
type exitRecord struct {
	// ExitCode is the replica's exit status as /bin/sh reports it: 128+N when signal N
	// killed it. Nil when the command never ran.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Term is set when the supervisor received SIGTERM (Stop sends it to the whole
	// process group) before the replica ended.
	Term bool `json:"term,omitempty"`
	// Error says why the command could not be started.
	Error string `json:"error,omitempty"`
}

// phase maps the record to a replica's phase, exit code and message. gangStopped is
// whether Stop was called for the gang: a replica is Stopped only if it was signalled
// and the signal came from Stop.
func (e *exitRecord) phase(gangStopped bool) (schemas.ReplicaPhase, *int32, string) {
	sig := ""
	if e.ExitCode != nil {
		sig = signalOf(*e.ExitCode)
	}
	switch {
	case e.Error != "":
		return schemas.ReplicaFailed, e.ExitCode, e.Error
	case e.Term && gangStopped:
		switch {
		case e.ExitCode == nil:
			return schemas.ReplicaStopped, nil, "stopped before it started"
		case sig != "":
			return schemas.ReplicaStopped, e.ExitCode, "stopped by " + sig
		}
		return schemas.ReplicaStopped, e.ExitCode, "stopped"
	case e.ExitCode == nil && e.Term:
		return schemas.ReplicaFailed, nil, "terminated by SIGTERM before it started"
	case e.ExitCode == nil:
		return schemas.ReplicaFailed, nil, "ended without an exit status"
	case *e.ExitCode == 0:
		return schemas.ReplicaSucceeded, e.ExitCode, ""
	case sig != "":
		return schemas.ReplicaFailed, e.ExitCode, "killed by " + sig
	}
	return schemas.ReplicaFailed, e.ExitCode, fmt.Sprintf("exited with code %d", *e.ExitCode)
}

// failureClass classifies a failed replica: killed by a signal, or exited non-zero.
func (e *exitRecord) failureClass(phase schemas.ReplicaPhase) schemas.FailureClass {
	switch {
	case phase != schemas.ReplicaFailed:
		return ""
	case e.Error != "":
		return schemas.FailureConfig
	case e.ExitCode != nil && signalOf(*e.ExitCode) != "":
		return schemas.FailureSignal
	case e.ExitCode != nil:
		return schemas.FailureError
	}
	return schemas.FailureUnclassified
}

// signalOf names the signal an exit status of 128+N stands for, or "". /bin/sh
// reports a process killed by signal N as 128+N, so a process that exits with such a
// code itself reads as killed too (bash, and Kubernetes, share the ambiguity).
func signalOf(code int32) string {
	if code <= 128 || code > 128+64 {
		return ""
	}
	return unix.SignalName(syscall.Signal(code - 128))
}

// readExit reads a replica's exit file and its modification time (the replica's
// finish time), or returns nil when there is none.
func readExit(rdir string) (*exitRecord, time.Time, error) {
	f, err := os.Open(filepath.Join(rdir, exitFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("local: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("local: %w", err)
	}
	var e exitRecord
	if err := json.NewDecoder(f).Decode(&e); err != nil {
		return nil, time.Time{}, fmt.Errorf("local: %s: %w", filepath.Join(rdir, exitFile), err)
	}
	return &e, fi.ModTime().UTC(), nil
}

// writeExit records how a replica ended, when the supervisor could not.
func writeExit(rdir string, e exitRecord) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(rdir, exitFile), append(b, '\n'))
}

// writeFileAtomic writes data to a temporary file and renames it into place, so a
// reader, or a worker restarting after a crash, sees the whole file or none of it.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// readPid reads a replica's pid file (the supervisor's pid); 0 when there is none yet.
// The supervisor writes the file with one write, so a reader may see it empty, never
// torn.
func readPid(rdir string) int {
	b, err := os.ReadFile(filepath.Join(rdir, pidFile))
	if err != nil {
		return 0
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &pid); err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// pidTime is when the supervisor recorded its pid: the replica's start time.
func pidTime(rdir string) *time.Time {
	fi, err := os.Stat(filepath.Join(rdir, pidFile))
	if err != nil {
		return nil
	}
	return new(fi.ModTime().UTC())
}

// lockGang takes the gang's lock: an flock on <dir>/.lock. Launch, Stop and Cleanup
// hold it, so they never interleave, whether they run in this process or in another
// worker on the same state directory; the kernel drops it when its holder dies. It
// returns os.ErrNotExist when the gang directory does not exist.
func lockGang(ctx context.Context, dir string) (unlock func(), err error) {
	path := filepath.Join(dir, lockFile)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := flock(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		// Cleanup removes the directory, lock file included, with the lock held: a
		// waiter then holds a lock on a file nobody else will open. Start over.
		held, err1 := f.Stat()
		cur, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, cur) {
			return func() { f.Close() }, nil
		}
		f.Close()
		if err2 != nil && !errors.Is(err2, os.ErrNotExist) {
			return nil, err2
		}
		if !exists(dir) {
			return nil, os.ErrNotExist
		}
	}
}

// flock takes an exclusive lock on f, polling so that ctx can interrupt the wait.
func flock(ctx context.Context, f *os.File) error {
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// gangLocked reports whether someone holds the gang's lock: a Launch (Stop, Cleanup)
// is in progress, here or in another worker.
func gangLocked(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	return errors.Is(err, unix.EWOULDBLOCK)
}
