package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/opendlc/opendlc/activities"
)

const (
	// maxLine is the longest line recorded as one record; longer lines are split so
	// that one runaway line cannot exhaust memory or stall the log.
	maxLine = 64 << 10
	// drainTimeout bounds how long output is read after the process group is gone: a
	// process that left the group (setsid) may hold the pipes open forever.
	drainTimeout = 2 * time.Second
	// groupExitTimeout bounds how long the end of a replica waits for the rest of its
	// process group to die after SIGKILL (a process in uninterruptible sleep, on a hung
	// NFS mount say, may take long).
	groupExitTimeout = 5 * time.Second
	// replicaMarker is set in every replica's environment to its state directory, which
	// its descendants inherit. Stop uses it to recognise, with certainty, the leftovers
	// of a replica that a previous worker process started.
	replicaMarker = "OPENDLC_LOCAL_REPLICA_DIR"

	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// proc is a replica process started by this Backend.
type proc struct {
	pid   int // also its process group id (Setpgid)
	start time.Time
	// done is closed once the process is reaped, its output drained and exit.json
	// written.
	done chan struct{}

	mu sync.Mutex
	// exited is set once the process has ended but before it is reaped: until then its
	// zombie keeps the pid, so the group id cannot name another group and is safe to
	// signal.
	exited bool
	// stopRequested is set when Stop signalled the process before it ended.
	stopRequested bool

	logMu sync.Mutex // orders records of both streams, and their seq, in output.log
	log   *os.File
	seq   int64
	buf   bytes.Buffer
	enc   *json.Encoder
}

// start starts one replica process and the goroutines that capture its output and reap
// it. It returns nil and no error when the command could not be started; that is
// recorded in exit.json.
func (b *Backend) start(rdir string, r activities.ReplicaSpec, env []string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(rdir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local: %s: %w", r.Name, err)
	}
	// Pipes as *os.File, not cmd.StdoutPipe: os/exec then starts no copying goroutines
	// of its own, and we decide when output is drained.
	outR, outW, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("local: %s: %w", r.Name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		logf.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("local: %s: %w", r.Name, err)
	}
	// Not CommandContext: the process must outlive the Launch activity.
	cmd := exec.Command(r.Command[0], r.Command[1:]...)
	cmd.Dir = b.workingDir(r.WorkingDir)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = sysProcAttr()
	err = startCmd(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		logf.Close()
		if werr := writeExit(rdir, exitRecord{Error: "cannot start: " + err.Error(), Time: time.Now().UTC()}); werr != nil {
			return nil, fmt.Errorf("local: %s: %w", r.Name, werr)
		}
		return nil, nil
	}

	p := &proc{pid: cmd.Process.Pid, start: time.Now().UTC(), done: make(chan struct{}), log: logf}
	p.enc = json.NewEncoder(&p.buf)
	p.enc.SetEscapeHTML(false)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.copyLines("stdout", outR) }()
	go func() { defer readers.Done(); p.copyLines("stderr", errR) }()
	go p.wait(cmd, rdir, &readers, outR, errR)
	return p, nil
}

// signal sends sig to the process's group unless the process has already ended, and
// remembers that the replica was stopped.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return
	}
	p.stopRequested = true
	_ = syscall.Kill(-p.pid, sig)
}

// wait reaps the process, waits for its output, and records how it ended.
func (p *proc) wait(cmd *exec.Cmd, rdir string, readers *sync.WaitGroup, pipes ...*os.File) {
	defer close(p.done)
	// reap kills what is left of the group once the main process ends, as a container
	// runtime does, so no stray process keeps running or holds the pipes.
	waitErr := reap(cmd, func() {
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
	})
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		for _, f := range pipes {
			f.Close() // unblocks the readers
		}
		<-drained
	}
	for _, f := range pipes {
		f.Close()
	}
	p.logMu.Lock()
	p.log.Close()
	p.logMu.Unlock()

	rec := exitRecord{Time: time.Now().UTC()}
	p.mu.Lock()
	rec.Stopped = p.stopRequested
	p.mu.Unlock()
	if ws, ok := waitStatus(cmd); ok {
		code := int32(ws.ExitStatus())
		if ws.Signaled() {
			code = 128 + int32(ws.Signal())
			rec.Signal = unix.SignalName(ws.Signal())
			if rec.Signal == "" {
				rec.Signal = ws.Signal().String()
			}
		}
		rec.ExitCode = &code
	} else {
		rec.Error = fmt.Sprintf("wait: %v", waitErr)
	}
	// If this fails (disk full), the replica reads as lost once this Backend is gone;
	// until then Observe still sees it Running. There is no one to report to here.
	_ = writeExit(rdir, rec)
}

// waitStatus returns the process's wait status, if it was reaped.
func waitStatus(cmd *exec.Cmd) (syscall.WaitStatus, bool) {
	if cmd.ProcessState == nil {
		return 0, false
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ws, ok
}

// copyLines records r's lines until r ends. Lines longer than maxLine are split, at a
// UTF-8 character boundary where possible, rather than dropped or buffered whole.
func (p *proc) copyLines(stream string, r io.Reader) {
	buf := make([]byte, 0, maxLine)
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		data := chunk[:n]
		for len(data) > 0 {
			if i := bytes.IndexByte(data, '\n'); i >= 0 && len(buf)+i <= maxLine {
				p.emit(stream, append(buf, data[:i]...))
				buf, data = buf[:0], data[i+1:]
				continue
			}
			take := min(maxLine-len(buf), len(data))
			buf, data = append(buf, data[:take]...), data[take:]
			if len(buf) == maxLine {
				cut := runeCut(buf)
				p.emit(stream, buf[:cut])
				buf = buf[:copy(buf, buf[cut:])]
			}
		}
		if err != nil {
			if len(buf) > 0 {
				p.emit(stream, buf)
			}
			return
		}
	}
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

// emit appends one record to output.log. Seq is assigned under the same lock as the
// write, so the file is in seq order over both streams.
func (p *proc) emit(stream string, line []byte) {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	p.seq++
	p.buf.Reset()
	// Invalid UTF-8 becomes U+FFFD: records are JSON, and every consumer downstream
	// (NATS events, log systems) wants text.
	if err := p.enc.Encode(logRecord{Stream: stream, Seq: p.seq, Time: time.Now().UTC(), Line: string(line)}); err != nil {
		return
	}
	// One write per record: a reader sees whole records, or a partial last one it
	// leaves for later.
	_, _ = p.log.Write(p.buf.Bytes())
}
