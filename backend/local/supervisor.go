package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/opendlc/opendlc/backend"
	"golang.org/x/sys/unix"
)

const (
	// replicaMarker is set in every replica's environment to its state directory, which
	// the supervisor, the replica and their descendants inherit. It tells a replica's
	// processes apart from any other process, a reused pid included.
	replicaMarker = "OPENDLC_LOCAL_REPLICA_DIR"

	// supervisorName is the supervisor's $0, which ps shows.
	supervisorName = "opendlc-supervisor"

	// supervisorScript is the supervisor: /bin/sh -c supervisorScript supervisorName
	// <replica dir> <mv> <argv...>, started in a session of its own, with fd 3 the write
	// end of a pipe the worker reads. The replica's argv are positional parameters,
	// never interpolated into the script.
	//
	// It traps SIGTERM (Stop signals the whole process group, the supervisor included)
	// with a handler rather than ignoring it: the subshell that runs the replica resets
	// trapped signals to their default, so the replica gets SIGTERM's default action,
	// which an ignored signal would not give it. It records its pid, then runs the
	// replica in the foreground, in a subshell with stdout and stderr appended to
	// output.log. The subshell tells the worker it runs (in a subshell of its own, so
	// that a worker gone meanwhile, whose pipe then raises SIGPIPE, does not stop it),
	// and execs the command: "exec" makes it a program, never a shell builtin or
	// function. When the replica has ended, its file descriptors are closed and the
	// whole of its output is in the file: the supervisor writes the exit status to
	// exit.tmp and renames it to exit, then kills what is left of its process group,
	// itself included, as a container runtime does when a container's main process
	// ends. A SIGTERM received before the replica started means it never starts. The
	// files it writes in the state directory are mode 0600 (umask 077); the replica gets
	// the worker's umask back.
	supervisorScript = `dlc_d=$1 dlc_mv=$2 dlc_term=false dlc_umask=$(umask)
shift 2
umask 077
trap 'dlc_term=true' TERM
echo $$ >"$dlc_d/pid" || exit 125
if [ "$dlc_term" = false ]; then
	( (echo ok >&3) 2>/dev/null; umask "$dlc_umask"; exec "$@" 3>&-) >>"$dlc_d/output.log" 2>&1
	dlc_exit="{\"exitCode\":$?,\"term\":$dlc_term}"
else
	dlc_exit='{"term":true}'
fi
exec 3>&-
printf '%s\n' "$dlc_exit" >"$dlc_d/exit.tmp" && "$dlc_mv" -f "$dlc_d/exit.tmp" "$dlc_d/exit"
kill -KILL 0
`
)

// child is a supervisor this Backend started: the worker is its parent, so it must
// reap it.
type child struct {
	pid  int
	done chan struct{} // closed once the supervisor has been reaped
}

// start starts the supervisor of one replica, which runs argv (the replica's command
// with its first word resolved by lookPath, as its framework runs it), and waits until it is ready: it has recorded its
// pid and the replica's process runs, with SIGTERM's default action (the command is
// being exec'd), so that a Stop that follows Launch reaches it. It returns no error when
// the supervisor could not be started: that is recorded in the exit file, as a pod whose
// container cannot run is reported rather than refused.
func (b *Backend) start(ctx context.Context, rdir string, r backend.ReplicaSpec, argv []string, env []string) error {
	wd := b.workingDir(r.WorkingDir)
	failed := func(err error) error {
		if werr := cannotStart(rdir, err); werr != nil {
			return fmt.Errorf("local: %s: %w", r.Name, werr)
		}
		return nil
	}
	args := append([]string{"-c", supervisorScript, supervisorName, rdir, b.mv}, argv...)
	cmd := exec.Command(shell, args...)
	cmd.Dir = wd
	cmd.Env = env
	// A session of its own: no signal meant for the worker's process group or terminal
	// reaches it, and its id names every process of the replica. No parent-death
	// signal: the replica outlives the worker.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("local: %s: %w", r.Name, err)
	}
	cmd.ExtraFiles = []*os.File{readyW} // fd 3
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		ready.Close()
		return failed(err)
	}
	c := &child{pid: cmd.Process.Pid, done: make(chan struct{})}
	b.mu.Lock()
	b.children[rdir] = c
	b.mu.Unlock()
	go func() {
		_ = cmd.Wait() // the supervisor ends by killing itself; its status means nothing
		b.mu.Lock()
		if b.children[rdir] == c {
			delete(b.children, rdir)
		}
		b.mu.Unlock()
		close(c.done)
		b.notifyGang(gangIDOf(rdir)) // the replica has ended: see GangChanges
	}()

	acks := make(chan string, 1)
	go func() {
		// "ok" once the replica runs; EOF if the supervisor ended before that.
		ack, _ := bufio.NewReader(ready).ReadString('\n')
		ready.Close()
		acks <- ack
	}()
	select {
	case ack := <-acks:
		if ack == "ok\n" {
			return nil
		}
	case <-ctx.Done():
		// The supervisor goes on, and records its pid: it is claimed and started.
		return ctx.Err()
	}
	// It ended before it was ready (the state directory is not writable, say).
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if exists(filepath.Join(rdir, exitFile)) {
		return nil
	}
	return failed(errors.New("the supervisor ended before it started the command"))
}

// cannotStart records that a replica's command could not be started.
func cannotStart(rdir string, why error) error {
	return writeExit(rdir, exitRecord{Error: "cannot start: " + why.Error()})
}

// child returns the supervisor of rdir this Backend started and has not reaped yet, or
// nil.
func (b *Backend) child(rdir string) *child {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.children[rdir]
}

// shell runs supervisorScript.
const shell = "/bin/sh"

// defaultPath is the search path of /bin/sh (dash's) when the environment sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookPath finds the program the supervisor will execute for argv[0], the way the
// shell's exec does: names with a slash are paths (relative to the replica's working
// directory), other names are searched in the replica's PATH. Checking before the
// supervisor starts gives a missing program a clear message instead of exit status 127.
// It returns what to pass to the supervisor: argv[0] itself, unless it starts with
// "-" and would read as an option.
func lookPath(name, wd string, env []string) (string, error) {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(wd, p)
	}
	if strings.Contains(name, "/") {
		if err := executable(abs(name)); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		if strings.HasPrefix(name, "-") {
			return "./" + name, nil
		}
		return name, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v // the last one wins, as in the environment the shell gets
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "." // POSIX: an empty entry is the working directory
		}
		p := filepath.Join(dir, name)
		if executable(abs(p)) != nil {
			continue
		}
		if strings.HasPrefix(name, "-") {
			if !filepath.IsAbs(p) && !strings.HasPrefix(p, ".") {
				p = "./" + p
			}
			return p, nil
		}
		return name, nil
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

// executable reports why path cannot be executed, or nil.
func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			return pe.Err
		}
		return err
	}
	if fi.IsDir() {
		return syscall.EISDIR
	}
	return unix.Access(path, unix.X_OK)
}
