package kubestack

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

// stopTimeout is how long Close waits after SIGTERM before it sends SIGKILL.
const stopTimeout = 10 * time.Second

// process is a component run as a child: its own process group, output
// appended to Dir/<name>.log, killed by the kernel if this process dies
// first. (A minimal copy of devstack's helper.)
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFrom int64 // offset in the log where this run's output begins
	done    chan struct{}
	err     error // exit status, valid once done is closed
	once    sync.Once
	stopErr error
}

// startProcess runs bin with args, appending its stdout and stderr to
// logPath. The process outlives any context: only stop ends it.
func startProcess(name, bin string, args []string, logPath string, extraEnv ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubestack: %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "\n=== kubestack %s: %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	from, _ := logFile.Seek(0, io.SeekEnd)

	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// KUBECONFIG and friends from a developer's shell must not redirect a
	// component: everything it needs is in its flags.
	cmd.Env = append(childEnv("KUBECONFIG=", "ETCD_", "KWOK_"), extraEnv...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("kubestack: start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFrom: from, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, with an error that quotes
// the end of its log.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, fmt.Errorf("kubestack: %s exited (%v); end of %s:\n%s", p.name, p.err, p.logPath, p.logTail(20))
	default:
		return false, nil
	}
}

// logTail returns the last n lines this run wrote to the log.
func (p *process) logTail(n int) string {
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

// addrInUse reports whether the process died because a port was taken
// between our probe and its bind.
func (p *process) addrInUse() bool {
	return strings.Contains(p.logTail(50), "address already in use")
}

// stop sends SIGTERM to the process group, then SIGKILL after stopTimeout.
// It is safe to call more than once.
func (p *process) stop() error {
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
		case <-time.After(stopTimeout):
		}
		signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.stopErr = fmt.Errorf("kubestack: %s did not stop within %s of SIGTERM; killed", p.name, stopTimeout)
	})
	return p.stopErr
}

// poll calls ready until it succeeds, the process exits, or ctx ends. The
// last error from ready is reported on timeout, since it says what was not
// ready yet.
func (p *process) poll(ctx context.Context, ready func(context.Context) error) error {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var last error
	for {
		if ok, err := p.exited(); ok {
			return err
		}
		last = p.try(ctx, ready)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubestack: %s not ready: %w (last error: %v); end of %s:\n%s", p.name, ctx.Err(), last, p.logPath, p.logTail(20))
		case <-p.done:
		case <-ticker.C:
		}
	}
}

// try runs one readiness check, cut short if the process exits meanwhile.
func (p *process) try(ctx context.Context, ready func(context.Context) error) error {
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

// childEnv returns this process's environment without the variables whose
// names start with one of drop.
func childEnv(drop ...string) []string {
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
