package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// Names of the files in a gang's state directory (see the package comment).
const (
	stateFile   = "gang.json"
	stoppedFile = "stopped"
	pidFile     = "pid"
	logFile     = "output.log"
	exitFile    = "exit.json"
)

// gangState is gang.json.
type gangState struct {
	Spec activities.GangSpec `json:"spec"`
	// Ports are the named ports allocated at the first Launch, reused by later ones so
	// every replica of the gang agrees on them.
	Ports map[string]int `json:"ports,omitempty"`
}

// readState reads gang.json; a gang without one is activities.ErrGangNotFound.
func readState(dir string) (gangState, error) {
	var st gangState
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("%w: %s", activities.ErrGangNotFound, filepath.Base(dir))
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
func sameSpec(a, b activities.GangSpec) (bool, error) {
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

// exitRecord is exit.json: how a replica ended. It is written only after the replica's
// output is fully in output.log, so its presence means "the log is complete".
type exitRecord struct {
	// ExitCode is the process's exit status, or 128+signal when a signal killed it (the
	// shell's and Kubernetes' convention). Nil when the process never started.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Signal names the signal that killed the process, if one did.
	Signal string `json:"signal,omitempty"`
	// Stopped is set when Stop was asked for before the process ended.
	Stopped bool `json:"stopped,omitempty"`
	// Error says why the process could not be started or waited for.
	Error string    `json:"error,omitempty"`
	Time  time.Time `json:"time"`
}

// phase maps the record to a replica's phase, exit code and message.
func (e *exitRecord) phase() (schemas.ReplicaPhase, *int32, string) {
	switch {
	case e.Error != "":
		return schemas.ReplicaFailed, e.ExitCode, e.Error
	case e.Stopped:
		msg := "stopped"
		if e.Signal != "" {
			msg = "stopped by " + e.Signal
		}
		return schemas.ReplicaStopped, e.ExitCode, msg
	case e.ExitCode != nil && *e.ExitCode == 0:
		return schemas.ReplicaSucceeded, e.ExitCode, ""
	case e.Signal != "":
		return schemas.ReplicaFailed, e.ExitCode, "killed by " + e.Signal
	case e.ExitCode != nil:
		return schemas.ReplicaFailed, e.ExitCode, fmt.Sprintf("exited with code %d", *e.ExitCode)
	default:
		return schemas.ReplicaFailed, nil, "ended without an exit status"
	}
}

// readExit reads a replica's exit.json, or returns nil when there is none.
func readExit(rdir string) (*exitRecord, error) {
	b, err := os.ReadFile(filepath.Join(rdir, exitFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	var e exitRecord
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("local: %s: %w", filepath.Join(rdir, exitFile), err)
	}
	return &e, nil
}

// writeExit records how a replica ended.
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

// readPid reads a replica's pid file; 0 when there is none.
func readPid(rdir string) int {
	b, err := os.ReadFile(filepath.Join(rdir, pidFile))
	if err != nil {
		return 0
	}
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &pid); err != nil {
		return 0
	}
	return pid
}
