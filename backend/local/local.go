// Package local is the embedded backend: every replica of a gang is a process on the
// worker's host, with the same environment contract as a pod, its output captured to
// disk and its exit observed. It makes `dlc run -f job.yaml` work on a laptop.
//
// # Replicas outlive the worker
//
// A worker may crash or restart at any moment, and a training run must not notice: a
// crash or restart of any process loses nothing and duplicates nothing. So no replica
// depends on the worker process. Each runs under a small supervisor, a /bin/sh script
// (supervisorScript) that the worker starts in a session of its own and without a
// parent-death signal. The supervisor runs the replica's argv, passed as positional
// parameters and never interpolated, with stdout and stderr appended to one file; when
// the replica has ended it writes the exit status to a file, atomically (exit.tmp
// renamed to exit). The worker holds no pipe and no handle a replica needs: pid, output
// and exit status are files, which any worker process on the same state directory can
// read. A restarted worker builds a new Backend on the same state directory and
// re-adopts what runs: Observe reports it Running, FollowLogs streams it, Stop stops it,
// and its exit status is read from the file when it ends.
//
// State lives under one directory per gang:
//
//	<stateDir>/<workspace>.<job>.a<attempt>/
//	    gang.json        the spec and the ports allocated for it
//	    .lock            flock'd by Launch, Stop and Cleanup, across worker processes
//	    stopped          present once Stop was called
//	    files/           the framework's files (an MPI hostfile: files/etc/mpi/hostfile)
//	    netns            with WithSandbox: the gang's network namespace (a bind mount)
//	    sandbox-etc/     with WithSandbox: the replicas' /etc/passwd, group and hosts
//	    <replica>/       created (mkdir) just before its supervisor starts: the claim
//	        pid          the supervisor's pid, also its session and process group id;
//	                     its modification time is the replica's start time
//	        output.log   stdout and stderr, merged, as the replica wrote them
//	        output.idx   byte offsets of every 1024th record, for fast resumes
//	        exit         how it ended, {"exitCode":N,"term":bool}; its modification time
//	                     is the finish time
//	        tmp/         with WithSandbox: the replica's /tmp
//
// GPU allocations are <stateDir>/.gpus.json, changed under an flock on .gpus.lock (see
// gpus.go).
//
// Launch is idempotent: a replica directory is created once, so a replica is never
// started twice, whichever worker retries the Launch.
//
// A replica runs while its supervisor does. The supervisor is recognised by its pid
// and, on Linux, by the replica's marker, OPENDLC_LOCAL_REPLICA_DIR=<replica dir>, in
// its environment (every process of the replica inherits it), so a reused pid is never
// mistaken for it. Once it has ended, the exit file says how the replica did; a
// supervisor gone without one (the host rebooted, someone killed it) leaves its replica
// Failed with LostMessage.
//
// The exit status is the shell's: 128+N for a replica killed by signal N, reported as
// killed ("stopped", when Stop sent the signal) by that signal. When the replica's main
// process ends, the supervisor kills what is left of its process group, as a container
// runtime does when a container's main process ends. Stop sends SIGTERM to the process
// group (the supervisor traps it and waits on), and after the grace period SIGKILL to
// every other process of the supervisor's session or carrying the marker; the
// supervisor then records the status and ends.
//
// Logs: stdout and stderr are one stream, as on Kubernetes, and every LogLine's Stream
// is "stdout". A record is a line of output.log (long lines are split, see nextRecord);
// its Seq is its 1-based number in the file, the same for every reader, so a forwarder
// resuming after seq N in another worker process neither repeats nor skips a line.
//
// Replicas inherit the worker's whole environment, then WithEnv's, then their own, then
// the framework's rendezvous variables, then the marker. The environment passes through
// /bin/sh, which drops variables whose names are not shell identifiers.
//
// So a replica can do whatever the worker's user can: read the stack's state directory,
// connect to Temporal and NATS. That is fine for one user on a laptop and not for
// several workspaces on one stack: WithSandbox runs each replica as its workspace's
// own user, in Linux namespaces, with a minimal environment, no view of the state
// directory and no network beyond its gang and the S3 gateway (sandbox.go says how). On Unix systems
// other than Linux there is no /proc: a supervisor is recognised by its pid alone, and
// Stop reaches only its process group.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
)

var _ backend.Backend = (*Backend)(nil)

// LostMessage is the message of a replica whose supervisor is gone without having
// recorded how the replica ended: the host rebooted, someone killed the supervisor, or
// the worker that claimed the replica died before starting it.
const LostMessage = "lost: its supervisor is gone and recorded no exit status"

// killTimeout bounds each wait of Stop for processes to end after SIGKILL (a process in
// uninterruptible sleep, on a hung NFS mount say, may take long).
const killTimeout = 5 * time.Second

// Backend runs gangs as local processes. It is safe for concurrent use, and several
// Backends, in one process or several, may share a state directory.
type Backend struct {
	stateDir string
	baseDir  string
	node     string
	env      []schemas.EnvVar
	wsEnv    WorkspaceEnvFunc // per-workspace variables (workspace_env.go)
	grace    time.Duration
	poll     time.Duration
	mv       string   // the mv(1) supervisors rename the exit file with
	gpus     []string // the GPU inventory (gpus.go)
	gpusSet  bool     // GPU requests are enforced
	sb       *sandbox // WithSandbox's (sandbox.go); nil without

	mu       sync.Mutex
	children map[string]*child // by replica directory
	// gangWaiters are the channels GangChanges gave out, by gang id; adopted are the
	// replica directories whose supervisor, started by another worker process, is
	// waited on (changes.go).
	gangWaiters map[string]chan struct{}
	adopted     map[string]bool

	fwdMu sync.Mutex
	fwds  map[string][]net.Listener // the sandbox's forwards, by gang directory

	readings readings // shared by resource samples (resources.go)
}

// Option configures a Backend.
type Option func(*Backend) error

// WithStateDir sets the directory holding every gang's state and logs. Default:
// filepath.Join(os.TempDir(), "opendlc-local").
func WithStateDir(dir string) Option {
	return dirOption("state", dir, func(b *Backend) *string { return &b.stateDir })
}

// WithBaseDir sets the directory a replica's relative WorkingDir is resolved against,
// and the working directory of replicas that set none. Default: the process's working
// directory when New is called.
func WithBaseDir(dir string) Option {
	return dirOption("base", dir, func(b *Backend) *string { return &b.baseDir })
}

// dirOption sets the directory field picks to dir, and refuses an empty one; what
// names it in the error ("local: empty <what> dir").
func dirOption(what, dir string, field func(*Backend) *string) Option {
	return func(b *Backend) error {
		if dir == "" {
			return errors.New("local: empty " + what + " dir")
		}
		*field(b) = dir
		return nil
	}
}

// WithNode sets the name reported as every replica's Node. Default: os.Hostname().
func WithNode(name string) Option {
	return func(b *Backend) error {
		b.node = name
		return nil
	}
}

// WithEnv adds variables to every replica's environment, after the worker's own and
// before the replica's (so a job can override them). The worker passes the S3 endpoint
// and credentials this way; they are never written to the state directory. Default:
// none. Repeated options accumulate.
func WithEnv(env ...schemas.EnvVar) Option {
	return func(b *Backend) error {
		b.env = append(b.env, env...)
		return nil
	}
}

// WithStopGracePeriod sets how long Stop waits after SIGTERM before SIGKILL. Default: 5s.
func WithStopGracePeriod(d time.Duration) Option {
	return func(b *Backend) error {
		if d < 0 {
			return fmt.Errorf("local: negative stop grace period %v", d)
		}
		b.grace = d
		return nil
	}
}

// New returns a Backend. It creates the state directory. A Backend on the state
// directory of a previous worker process re-adopts that worker's replicas.
func New(opts ...Option) (*Backend, error) {
	b := &Backend{
		stateDir: filepath.Join(os.TempDir(), "opendlc-local"),
		grace:    5 * time.Second,
		poll:     50 * time.Millisecond,
		mv:       "mv",
		children: map[string]*child{},
		fwds:     map[string][]net.Listener{},

		gangWaiters: map[string]chan struct{}{},
		adopted:     map[string]bool{},
	}
	for _, o := range opts {
		if err := o(b); err != nil {
			return nil, err
		}
	}
	var err error
	if b.baseDir == "" {
		if b.baseDir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("local: base dir: %w", err)
		}
	}
	if b.node == "" {
		if b.node, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("local: node name: %w", err)
		}
	}
	// Absolute paths: replicas run in other directories and the marker in their
	// environment must name their state unambiguously.
	if b.stateDir, err = filepath.Abs(b.stateDir); err != nil {
		return nil, fmt.Errorf("local: state dir: %w", err)
	}
	if b.baseDir, err = filepath.Abs(b.baseDir); err != nil {
		return nil, fmt.Errorf("local: base dir: %w", err)
	}
	if err := os.MkdirAll(b.stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if b.sb != nil {
		if err := b.sb.init([]string{b.stateDir}); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
	}
	if !b.gpusSet {
		b.gpus = detectGPUs()
		b.gpusSet = len(b.gpus) > 0
	}
	// Resolved with the worker's PATH: a job may set a PATH without one.
	if mv, err := exec.LookPath("mv"); err == nil && filepath.IsAbs(mv) {
		b.mv = mv
	}
	return b, nil
}

// Name returns "local".
func (b *Backend) Name() string { return "local" }

// Launch starts every replica of the gang that was not started before, by this Backend
// or by any other on the same state directory. It returns once every supervisor it
// started is ready. A replica whose command cannot be started (not found, not
// executable) is not a Launch error: it is recorded and Observe reports it Failed, as a
// pod whose container cannot run would be.
func (b *Backend) Launch(ctx context.Context, spec backend.GangSpec) error {
	fw, err := frameworks.Get(spec.Framework)
	if err != nil {
		return backend.InvalidSpec(err)
	}
	if err := validate(spec); err != nil {
		return backend.InvalidSpec(err)
	}
	dir := b.gangDir(spec.ID())
	var unlock func()
	for unlock == nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("local: %w", err)
		}
		unlock, err = lockGang(ctx, dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // not: a Cleanup removed it
			return fmt.Errorf("local: launch %s: %w", spec.ID(), err)
		}
	}
	defer unlock()

	st, err := b.loadOrInitState(dir, spec, fw.PortNames())
	if err != nil {
		return err
	}
	if exists(filepath.Join(dir, stoppedFile)) {
		// Stop is final for an attempt: a Launch retried after it starts nothing, and
		// Observe reports the replicas that never started as Stopped.
		return nil
	}
	gpus, err := b.allocateGPUs(ctx, spec)
	if err != nil {
		return err
	}
	wsEnv, err := b.workspaceEnv(ctx, spec.Workspace)
	if err != nil {
		return err
	}
	ep := b.filesEndpoints(dir, st.Ports)
	if err := writeFrameworkFiles(spec, ep); err != nil {
		return err
	}
	var sb *gangSandbox
	if b.sb != nil {
		if sb, err = b.prepareSandbox(ctx, dir, spec); err != nil {
			return err
		}
	}
	for _, r := range spec.Replicas {
		if err := ctx.Err(); err != nil {
			return err
		}
		fwEnv, err := frameworks.EnvFor(spec, r, ep)
		if err != nil {
			return backend.InvalidSpec(err)
		}
		rdir := filepath.Join(dir, r.Name)
		env := b.environ(spec.Workspace, r, wsEnv, fwEnv, rdir)
		if b.gpusSet {
			env = append(env, gpuEnv(gpus[r.Name])...)
		}
		argv0, notFound := lookPath(r.Command[0], b.workingDir(r.WorkingDir), env)
		// Mkdir, not MkdirAll: the directory is the claim, so a replica that a previous
		// worker started is never started again, even if that worker died before its
		// supervisor was ready. As little as possible happens between the claim and the
		// start: a worker that dies in between leaves the replica lost.
		if err := os.Mkdir(rdir, 0o700); err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return fmt.Errorf("local: %w", err)
		}
		if notFound != nil {
			if err := cannotStart(rdir, notFound); err != nil {
				return fmt.Errorf("local: %s: %w", r.Name, err)
			}
			continue
		}
		// The framework may run the command its own way (Slurm: once per task); the
		// command itself was resolved above, so a missing one still fails as such.
		resolved := r
		resolved.Command = append([]string{argv0}, r.Command[1:]...)
		if err := b.startIn(ctx, sb, rdir, r, frameworks.CommandFor(spec, resolved), env); err != nil {
			return err
		}
	}
	return nil
}

// startIn starts the replica in rdir as start does, in the gang's sandbox when sb is
// not nil. A replica the sandbox refuses is recorded as one that cannot start.
func (b *Backend) startIn(ctx context.Context, sb *gangSandbox, rdir string, r backend.ReplicaSpec, argv, env []string) error {
	if sb != nil {
		var err error
		if argv, err = sb.command(rdir, b.workingDir(r.WorkingDir), argv); err != nil {
			if refused, ok := errors.AsType[cannotRun](err); ok {
				if err := cannotStart(rdir, refused); err != nil {
					return fmt.Errorf("local: %s: %w", r.Name, err)
				}
				return nil
			}
			return err
		}
	}
	return b.start(ctx, rdir, r, argv, env)
}

// Observe reports every replica of the gang, in GangSpec order, from the state
// directory alone: it sees the replicas of previous worker processes as well as this
// one's.
func (b *Backend) Observe(ctx context.Context, ref backend.GangRef) (backend.GangStatus, error) {
	if err := ctx.Err(); err != nil {
		return backend.GangStatus{}, err
	}
	dir := b.gangDir(ref.ID())
	st, err := readState(dir)
	if err != nil {
		return backend.GangStatus{}, err
	}
	stopped := exists(filepath.Join(dir, stoppedFile))
	out := backend.GangStatus{Replicas: make([]schemas.ReplicaStatus, 0, len(st.Spec.Replicas))}
	for _, r := range st.Spec.Replicas {
		s, err := b.replicaStatus(dir, r, stopped)
		if err != nil {
			return backend.GangStatus{}, err
		}
		out.Replicas = append(out.Replicas, s)
	}
	if b.sb != nil {
		b.tendSandbox(dir, stopped, out.Replicas)
	}
	return out, nil
}

// replicaStatus derives one replica's state from its directory and its supervisor.
func (b *Backend) replicaStatus(dir string, r backend.ReplicaSpec, gangStopped bool) (schemas.ReplicaStatus, error) {
	s := schemas.ReplicaStatus{Name: r.Name, Role: r.Role, Index: r.Index, Phase: schemas.ReplicaPending}
	rdir := filepath.Join(dir, r.Name)
	if !exists(rdir) {
		if gangStopped {
			s.Phase, s.Message = schemas.ReplicaStopped, "stopped before it started"
		}
		return s, nil
	}
	pid := readPid(rdir)
	if pid == 0 && !exists(filepath.Join(rdir, exitFile)) {
		if gangLocked(dir) {
			return s, nil // claimed, and a Launch is starting it
		}
		pid = readPid(rdir) // a Launch may have finished since
	}
	// A replica runs until its supervisor has ended (for a supervisor this Backend
	// started: until it is reaped), even once the exit file is there: the supervisor
	// is still ending what is left of the replica. The supervisor before the exit file:
	// it writes the file before it ends, so a supervisor seen gone has written it by the
	// time the file is read.
	alive := b.supervising(rdir, pid)
	ex, finished, err := readExit(rdir)
	if err != nil {
		return s, err
	}
	s.Node = b.node
	if pid > 0 {
		s.StartTime = pidTime(rdir)
	}
	switch {
	case alive:
		s.Phase = schemas.ReplicaRunning
	case ex != nil:
		s.Phase, s.ExitCode, s.Message = ex.phase(gangStopped)
		s.Reason = ex.failureClass(s.Phase)
		s.FinishTime = &finished
	case pid == 0 && gangStopped:
		// Claimed by a Launch that died before starting it; Stop makes that final.
		s.Phase, s.Message = schemas.ReplicaStopped, "stopped before it started"
	default:
		s.Phase, s.Message, s.Reason = schemas.ReplicaFailed, LostMessage, schemas.FailureUnclassified
	}
	return s, nil
}

// Stop stops every replica of the gang, whichever worker process started it: SIGTERM to
// each running replica's process group, then, after the grace period, SIGKILL to what
// still runs. It returns once every supervisor has recorded how its replica ended and
// every process of the gang is gone. Replicas not started yet never will be. Stopping an
// unknown or finished gang does nothing.
func (b *Backend) Stop(ctx context.Context, ref backend.GangRef) error {
	return b.withGangLocked(ctx, ref, "stop", func(dir string) error {
		if err := b.stopLocked(ctx, dir); err != nil {
			return err
		}
		if err := b.releaseSandbox(dir); err != nil {
			return err
		}
		return b.releaseGPUs(ctx, ref.ID())
	})
}

// withGangLocked runs fn on the gang's state directory with the gang locked; an
// unknown gang (or one removed meanwhile) is nothing to do. A failed lock is an error
// of op.
func (b *Backend) withGangLocked(ctx context.Context, ref backend.GangRef, op string, fn func(dir string) error) error {
	dir := b.gangDir(ref.ID())
	if !exists(dir) {
		return nil
	}
	unlock, err := lockGang(ctx, dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("local: %s %s: %w", op, ref.ID(), err)
	}
	defer unlock()
	return fn(dir)
}

// supervising reports whether the supervisor pid of the replica in rdir has not ended:
// it runs, or it is a child of this Backend not reaped yet.
func (b *Backend) supervising(rdir string, pid int) bool {
	return pid > 0 && (b.child(rdir) != nil || supervisorAlive(pid, replicaMarker+"="+rdir))
}

// supervised is a replica with a recorded supervisor.
type supervised struct {
	rdir string
	pid  int
}

// stopLocked is Stop with the gang's lock held.
func (b *Backend) stopLocked(ctx context.Context, dir string) error {
	st, err := readState(dir)
	if errors.Is(err, backend.ErrGangNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, stoppedFile), []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n")); err != nil {
		return fmt.Errorf("local: stop %s: %w", filepath.Base(dir), err)
	}
	var running []supervised
	for _, r := range st.Spec.Replicas {
		rdir := filepath.Join(dir, r.Name)
		s := supervised{rdir: rdir, pid: readPid(rdir)}
		if b.supervising(s.rdir, s.pid) {
			running = append(running, s)
		}
	}

	for _, s := range running {
		b.signalGroup(s, syscall.SIGTERM)
	}
	if running, err = b.waitSupervisors(ctx, running, time.Now().Add(b.grace)); err != nil {
		return err
	}
	if len(running) > 0 {
		if canScanProcs {
			// Every process of theirs but the supervisors, which then record the status
			// and end.
			sups := map[int]string{}
			for _, s := range running {
				sups[s.pid] = s.rdir
			}
			if err := killGangProcs(ctx, dir, sups); err != nil {
				return err
			}
			if running, err = b.waitSupervisors(ctx, running, time.Now().Add(killTimeout)); err != nil {
				return err
			}
		}
		// A supervisor that does not end (or, without /proc, every one): kill its
		// group, itself included, and record the status in its stead.
		for _, s := range running {
			b.signalGroup(s, syscall.SIGKILL)
		}
		if _, err := b.waitSupervisors(ctx, running, time.Now().Add(killTimeout)); err != nil {
			return err
		}
		for _, s := range running {
			if !exists(filepath.Join(s.rdir, exitFile)) {
				code := int32(128 + syscall.SIGKILL)
				if err := writeExit(s.rdir, exitRecord{ExitCode: &code, Term: true}); err != nil {
					return fmt.Errorf("local: stop %s: %w", filepath.Base(dir), err)
				}
			}
		}
	}
	// Whatever is left: processes of the replicas that left their session, and those of
	// replicas whose supervisor was lost.
	return killGangProcs(ctx, dir, nil)
}

// signalGroup sends sig to a supervisor's process group, if the supervisor has not
// ended: until it has (until it is reaped, for a child of this Backend) the group id
// names its group and no other.
func (b *Backend) signalGroup(s supervised, sig syscall.Signal) {
	if b.supervising(s.rdir, s.pid) {
		_ = syscall.Kill(-s.pid, sig)
	}
}

// waitSupervisors waits until none of the supervisors runs (and those this Backend
// started are reaped) or the deadline passes, and returns those still running.
func (b *Backend) waitSupervisors(ctx context.Context, sups []supervised, deadline time.Time) ([]supervised, error) {
	for {
		var left []supervised
		for _, s := range sups {
			if b.supervising(s.rdir, s.pid) {
				left = append(left, s)
			}
		}
		if len(left) == 0 || !time.Now().Before(deadline) {
			return left, nil
		}
		sups = left
		if err := pause(ctx, 5*time.Millisecond); err != nil {
			return left, err
		}
	}
}

// killGangProcs sends SIGKILL to every process of the gang, until none is left or
// killTimeout passes: those that carry the marker of one of its replicas, and the other
// members of the session of a running supervisor in sups (pid to replica directory).
// The supervisors are spared, and so is what one runs once its replica has ended
// (mv(1), which would carry the marker until it execs): it is recording the exit
// status, and kills its group itself next.
func killGangProcs(ctx context.Context, dir string, sups map[int]string) error {
	recording := func(sup int) bool {
		rdir, ok := sups[sup]
		return ok && (exists(filepath.Join(rdir, exitTmpFile)) || exists(filepath.Join(rdir, exitFile)))
	}
	ofGang := func(p procInfo) bool {
		switch _, sup := sups[p.pid]; {
		case sup || recording(p.ppid):
			return false
		case filepath.Dir(markerDir(p.pid)) == dir:
			return true
		}
		_, inSession := sups[p.sid]
		return inSession
	}
	deadline := time.Now().Add(killTimeout)
	for {
		var victims []procInfo
		for _, p := range liveProcs() {
			if ofGang(p) {
				victims = append(victims, p)
			}
		}
		if len(victims) == 0 || !time.Now().Before(deadline) {
			return nil
		}
		for _, p := range victims {
			signalIf(p.pid, syscall.SIGKILL, func() bool {
				q, ok := procStat(p.pid)
				return ok && ofGang(q)
			})
		}
		if err := pause(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Cleanup stops the gang and removes its state directory, logs included.
func (b *Backend) Cleanup(ctx context.Context, ref backend.GangRef) error {
	return b.withGangLocked(ctx, ref, "cleanup", func(dir string) error {
		if err := b.stopLocked(ctx, dir); err != nil {
			return err
		}
		if err := b.releaseSandbox(dir); err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("local: cleanup %s: %w", ref.ID(), err)
		}
		return b.releaseGPUs(ctx, ref.ID())
	})
}

// gangDir is the gang's state directory. IDs that are not a single path element (which
// validate refuses at Launch) map to a path that never exists.
func (b *Backend) gangDir(id string) string {
	if !isPathElem(id) {
		return filepath.Join(b.stateDir, ".invalid", "-")
	}
	return filepath.Join(b.stateDir, id)
}

// environ is the environment of a replica of workspace ws. Later entries win (os/exec
// keeps the last of duplicate names): the worker's (less the credentials
// WithWorkspaceEnv replaces; in the sandbox, only PATH and the locale, and the sandbox's
// user), then PWD, then WithEnv's, then the workspace's, then the replica's, then the
// framework's, then the marker that tells the replica's processes from any other.
func (b *Backend) environ(ws string, r backend.ReplicaSpec, wsEnv, fwEnv []schemas.EnvVar, rdir string) []string {
	base := b.inherited()
	if b.sb != nil {
		base = sandboxEnv(ws)
	}
	// os/exec sets PWD to the command's Dir only when it builds the environment itself;
	// the worker's PWD would tell the replica it runs where the worker does.
	env := append(base, "PWD="+b.workingDir(r.WorkingDir))
	for _, list := range [][]schemas.EnvVar{b.env, wsEnv, r.Env, fwEnv} {
		for _, e := range list {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return append(env, replicaMarker+"="+rdir)
}

var _ backend.WorkingDirs = (*Backend)(nil)

// WorkingDir is where a replica with working directory wd runs: wd resolved against
// the base directory; false in the sandbox, which mounts it read-only for the replicas
// and confines them to their workspace's rights, which the worker reading as itself
// would not respect.
func (b *Backend) WorkingDir(wd string) (string, bool) { return b.workingDir(wd), b.sb == nil }

var _ backend.ReplicaTmpDirs = (*Backend)(nil)

// ReplicaTmpDir is where the replica's /tmp lies: in the sandbox its own directory
// (which only the replica's workspace user writes), without it the host's /tmp.
func (b *Backend) ReplicaTmpDir(ref backend.GangRef, replica string) (string, bool) {
	if b.sb == nil {
		return "/tmp", true
	}
	if !isPathElem(replica) {
		return "", false
	}
	return filepath.Join(b.gangDir(ref.ID()), replica, replicaTmpDir), true
}

// workingDir resolves a replica's working directory against the base directory.
func (b *Backend) workingDir(wd string) string {
	if wd == "" {
		return b.baseDir
	}
	if filepath.IsAbs(wd) {
		return wd
	}
	return filepath.Join(b.baseDir, wd)
}

// loadOrInitState returns the gang's recorded state, creating it (and allocating its
// ports) on the first Launch. A repeated Launch must bring the same spec: the gang's
// name is deterministic per attempt, so a different one is a caller bug.
func (b *Backend) loadOrInitState(dir string, spec backend.GangSpec, portNames []string) (gangState, error) {
	st, err := readState(dir)
	switch {
	case err == nil:
		same, err := sameSpec(st.Spec, spec)
		if err != nil {
			return st, err
		}
		if !same {
			return st, backend.InvalidSpec(fmt.Errorf("local: gang %s was launched with a different spec", spec.ID()))
		}
		return st, nil
	case !errors.Is(err, backend.ErrGangNotFound):
		return st, err
	}
	ports, err := allocatePorts(portNames)
	if err != nil {
		return st, err
	}
	st = gangState{Spec: spec, Ports: ports}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return st, fmt.Errorf("local: %w", err)
	}
	b2, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return st, fmt.Errorf("local: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, stateFile), append(b2, '\n')); err != nil {
		return st, fmt.Errorf("local: %w", err)
	}
	return st, nil
}

// endpoints are the local backend's addresses: every replica is on loopback.
type endpoints map[string]int

// Host returns 127.0.0.1.
func (endpoints) Host(string, int) string { return "127.0.0.1" }

// Port returns the gang's port with that name, or 0.
func (e endpoints) Port(name string) int { return e[name] }

// validate refuses gangs that cannot be laid out on disk or run.
func validate(spec backend.GangSpec) error {
	if len(spec.EnvFromSecrets) > 0 {
		return errors.New("local: spec.envFromSecrets needs the kubernetes backend (Secrets live in the cluster)")
	}
	for i, d := range spec.Data {
		switch {
		case d.PVC != nil:
			return fmt.Errorf("local: spec.data[%d].pvc needs the kubernetes backend (use a local path as uri)", i)
		case d.SecretRef != "":
			return fmt.Errorf("local: spec.data[%d].secretRef needs the kubernetes backend (Secrets live in the cluster)", i)
		}
	}
	if !isPathElem(spec.ID()) {
		return fmt.Errorf("local: gang id %q is not a valid directory name", spec.ID())
	}
	names := map[string]bool{}
	for i, r := range spec.Replicas {
		switch {
		case !isPathElem(r.Name):
			return fmt.Errorf("local: replicas[%d].name %q is not a valid directory name", i, r.Name)
		case strings.HasPrefix(r.Name, ".") || r.Name == stateFile || r.Name == stoppedFile:
			return fmt.Errorf("local: replicas[%d].name %q is reserved", i, r.Name)
		case names[r.Name]:
			return fmt.Errorf("local: replicas[%d].name %q is used twice", i, r.Name)
		case len(r.Command) == 0 || r.Command[0] == "":
			return fmt.Errorf("local: replicas[%d] (%s): empty command", i, r.Name)
		}
		names[r.Name] = true
	}
	return nil
}

// isPathElem reports whether s can be used as one directory name.
func isPathElem(s string) bool {
	return s != "" && s != "." && s != ".." && filepath.Base(s) == s && filepath.IsLocal(s)
}

func ptr[T any](v T) *T { return new(v) }
