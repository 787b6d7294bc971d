// Package proc runs the servers of the development and test stacks (Temporal, S3,
// etcd, kube-apiserver...) as child processes: each in its own process group, output
// appended to a log file, killed by the kernel if the parent dies first.
package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a server binary run as a child: its own process group, output
// appended to a log file, killed by the kernel if this process dies first.
type Process struct {
	owner       string // the package that runs it, for error messages
	name        string
	stopTimeout time.Duration
	cmd         *exec.Cmd
	logPath     string
	logFrom     int64 // offset in the log where this run's output begins
	done        chan struct{}
	err         error // exit status, valid once done is closed
	once        sync.Once
	stopErr     error
}

// Options are the optional settings of StartWith.
type Options struct {
	// Private runs the process with umask 077, so that every file and directory it
	// creates is its user's alone (a server's database, its objects).
	Private bool
	// Redact are strings (credentials the process is given) that never reach the log:
	// its output goes through a Redactor, which writes each as RedactedText.
	Redact []string
}

// Start runs bin with args and environment env, appending its stdout and stderr to
// logPath (made mode 0600). owner prefixes error messages ("devstack"); Stop waits
// stopTimeout after SIGTERM before SIGKILL. The process runs until Stop.
func Start(owner, name, bin string, args []string, logPath string, env []string, stopTimeout time.Duration) (*Process, error) {
	return StartWith(owner, name, bin, args, logPath, env, stopTimeout, Options{})
}

// privateShell runs its arguments with umask 077 (Options.Private): sh -c SCRIPT bin
// args... execs bin in place of the shell, so the process and its command line are
// bin's own.
const privateShell = `umask 077 && exec "$0" "$@"`

// StartWith is Start with Options.
func StartWith(owner, name, bin string, args []string, logPath string, env []string, stopTimeout time.Duration, o Options) (*Process, error) {
	logFile, err := openLog(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %s log: %w", owner, name, err)
	}
	fmt.Fprintf(logFile, "\n=== %s %s: %s %s\n", owner, time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	from, _ := logFile.Seek(0, io.SeekEnd)

	cmd := exec.Command(bin, args...)
	if o.Private {
		cmd = exec.Command("/bin/sh", append([]string{"-c", privateShell, bin}, args...)...)
	}
	var out io.Writer = logFile
	var redactor *Redactor
	if len(o.Redact) > 0 {
		// Through a pipe, which Wait drains; a grandchild that keeps it open delays
		// Wait by WaitDelay at most.
		redactor = NewRedactor(logFile, o.Redact...)
		out = redactor
		cmd.WaitDelay = 5 * time.Second
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", owner, name, err)
	}
	p := &Process{owner: owner, name: name, stopTimeout: stopTimeout, cmd: cmd, logPath: logPath, logFrom: from, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if redactor != nil {
			_ = redactor.Flush()
		}
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// openLog opens the log at path for appending, creating it mode 0600; a log that an
// earlier version left readable by others is narrowed to 0600.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Exited reports whether the process has ended, with an error that quotes
// the end of its log.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		// p.err is nil after a clean exit, which %w would print as %!w(<nil>).
		return true, fmt.Errorf("%s: %s exited (%v); end of %s:\n%s", p.owner, p.name, p.err, p.logPath, p.LogTail(20)) //nolint:errorlint
	default:
		return false, nil
	}
}

// LogTail returns the last n lines this run wrote to the log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(b)) < p.logFrom {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b[p.logFrom:]), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// AddrInUse reports whether the process died because a port was taken
// between our probe and its bind.
func (p *Process) AddrInUse() bool {
	return strings.Contains(p.LogTail(50), "address already in use")
}

// Stop sends SIGTERM to the process group, then SIGKILL after the stop timeout.
// It is safe to call more than once.
func (p *Process) Stop() error {
	p.once.Do(func() {
		select {
		case <-p.done:
			return // exited by itself
		default:
		}
		signalGroup(p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(p.stopTimeout):
		}
		signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.stopErr = fmt.Errorf("%s: %s did not stop within %s of SIGTERM; killed", p.owner, p.name, p.stopTimeout)
	})
	return p.stopErr
}

// Poll calls ready until it succeeds, the process exits, or ctx ends. The
// last error from ready is reported on timeout, since it says what was not
// ready yet.
func (p *Process) Poll(ctx context.Context, ready func(context.Context) error) error {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var last error
	for {
		if ok, err := p.Exited(); ok {
			return err
		}
		last = p.try(ctx, ready)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			// last is nil when ready never ran; %w would print it as %!w(<nil>).
			return fmt.Errorf("%s: %s not ready: %w (last error: %v); end of %s:\n%s", p.owner, p.name, ctx.Err(), last, p.logPath, p.LogTail(20)) //nolint:errorlint
		case <-p.done:
		case <-ticker.C:
		}
	}
}

// try runs one readiness check, cut short if the process exits meanwhile:
// a check can hang on a port the process never got to serve.
func (p *Process) try(ctx context.Context, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ready(ctx)
}

// ChildEnv returns this process's environment without the variables whose
// names start with one of drop, so a developer's shell cannot reconfigure a
// dev server behind our flags.
func ChildEnv(drop ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, prefix := range drop {
			if strings.HasPrefix(kv, prefix) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// Pid is the process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Name is the name the process was started with.
func (p *Process) Name() string { return p.name }
