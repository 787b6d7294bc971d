// Package local is the embedded backend: every replica of a gang is a process on the
// worker's host, with the same environment contract as a pod, its output captured to
// disk and its exit observed. It makes `dlc run -f job.yaml` work on a laptop.
//
// State lives under one directory per gang, so that a worker that restarts can tell which
// replicas were started before it and never starts one twice:
//
//	<stateDir>/<workspace>.<job>.a<attempt>/
//	    gang.json          the spec and the ports allocated for it
//	    stopped            present once Stop was called
//	    <replica>/         created just before the process starts: "this replica is claimed"
//	        pid            the process id (its modification time is the start time)
//	        output.log     stdout and stderr, one JSON record per line
//	        exit.json      written once the process is reaped and its output drained
//
// Each replica runs in its own process group. When its main process ends, whatever is
// left of the group is killed, as a container runtime does when a container's main
// process ends; Stop signals the whole group.
//
// Replicas die with the worker (Linux's parent-death signal), so a replica that a
// previous worker process started and that has no exit.json is reported lost rather than
// re-adopted: nobody is left to read its output or reap it. The processes such a replica
// had started itself do not get that signal; Stop finds them by the
// OPENDLC_LOCAL_REPLICA_DIR variable every replica's environment carries, and kills
// them. One state directory belongs to one worker process at a time.
//
// Replicas inherit the worker's whole environment, then WithEnv's, then their own, then
// the framework's rendezvous variables. Only Linux gets the parent-death signal and the
// leftover search; on other Unix systems replicas outlive a worker that dies.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
)

var _ activities.Backend = (*Backend)(nil)

// LostMessage is the message of a replica that a previous worker process started and
// that died with it.
const LostMessage = "lost: the worker restarted while the process ran"

// Backend runs gangs as local processes. It is safe for concurrent use.
type Backend struct {
	stateDir string
	baseDir  string
	node     string
	env      []schemas.EnvVar
	grace    time.Duration
	poll     time.Duration

	mu    sync.Mutex
	gangs map[string]*gangProcs // by gang ID; the gangs this Backend has touched
}

// gangProcs is what this Backend holds in memory about one gang.
type gangProcs struct {
	// op serialises Launch, Stop and Cleanup of the gang, so Stop never misses a process
	// that a concurrent Launch is starting.
	op sync.Mutex
	// procs are the replicas this Backend started, by name; guarded by Backend.mu.
	procs map[string]*proc
	// claimed are the replicas whose directory this Backend created, so that one being
	// started (claimed, no process yet) is not mistaken for a lost one; guarded by
	// Backend.mu.
	claimed map[string]bool
}

// Option configures a Backend.
type Option func(*Backend) error

// WithStateDir sets the directory holding every gang's state and logs. Default:
// filepath.Join(os.TempDir(), "opendlc-local").
func WithStateDir(dir string) Option {
	return func(b *Backend) error {
		if dir == "" {
			return errors.New("local: empty state dir")
		}
		b.stateDir = dir
		return nil
	}
}

// WithBaseDir sets the directory a replica's relative WorkingDir is resolved against,
// and the working directory of replicas that set none. Default: the process's working
// directory when New is called.
func WithBaseDir(dir string) Option {
	return func(b *Backend) error {
		if dir == "" {
			return errors.New("local: empty base dir")
		}
		b.baseDir = dir
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

// New returns a Backend. It creates the state directory.
func New(opts ...Option) (*Backend, error) {
	b := &Backend{
		stateDir: filepath.Join(os.TempDir(), "opendlc-local"),
		grace:    5 * time.Second,
		poll:     50 * time.Millisecond,
		gangs:    map[string]*gangProcs{},
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
	// environment (see replicaMarker) must name their state unambiguously.
	if b.stateDir, err = filepath.Abs(b.stateDir); err != nil {
		return nil, fmt.Errorf("local: state dir: %w", err)
	}
	if b.baseDir, err = filepath.Abs(b.baseDir); err != nil {
		return nil, fmt.Errorf("local: base dir: %w", err)
	}
	if err := os.MkdirAll(b.stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return b, nil
}

// Name returns "local".
func (b *Backend) Name() string { return "local" }

// Launch starts every replica of the gang that was not started before, by this Backend
// or by a previous worker process on the same state directory. A replica whose command
// cannot be started (not found, not executable) is not a Launch error: it is recorded
// and Observe reports it Failed, as a pod whose container cannot run would be.
func (b *Backend) Launch(ctx context.Context, spec activities.GangSpec) error {
	fw, err := frameworks.Get(spec.Framework)
	if err != nil {
		return invalidSpec(err)
	}
	if err := validate(spec); err != nil {
		return invalidSpec(err)
	}
	id := spec.ID()
	gp := b.lockGang(id)
	defer gp.op.Unlock()

	dir := b.gangDir(id)
	st, err := b.loadOrInitState(dir, spec, fw.PortNames())
	if err != nil {
		return err
	}
	if exists(filepath.Join(dir, stoppedFile)) {
		// Stop is final for an attempt: a Launch retried after it starts nothing, and
		// Observe reports the replicas that never started as Stopped.
		return nil
	}
	ep := endpoints(st.Ports)
	for _, r := range spec.Replicas {
		if err := ctx.Err(); err != nil {
			return err
		}
		if b.proc(id, r.Name) != nil {
			continue
		}
		fwEnv, err := frameworks.EnvFor(spec, r, ep)
		if err != nil {
			return invalidSpec(err)
		}
		rdir := filepath.Join(dir, r.Name)
		// Mkdir, not MkdirAll: the directory is the claim, so a replica that a previous
		// worker started is never started again, even if that worker died before
		// writing its pid.
		b.setClaimed(gp, r.Name, true)
		if err := os.Mkdir(rdir, 0o700); err != nil {
			b.setClaimed(gp, r.Name, false)
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return fmt.Errorf("local: %w", err)
		}
		p, err := b.start(rdir, r, b.environ(r, fwEnv, rdir))
		if err != nil {
			return err
		}
		if p == nil {
			continue // could not start; recorded in exit.json
		}
		b.mu.Lock()
		gp.procs[r.Name] = p
		b.mu.Unlock()
		if err := writeFileAtomic(filepath.Join(rdir, pidFile), fmt.Appendf(nil, "%d\n", p.pid)); err != nil {
			return fmt.Errorf("local: %s: %w", r.Name, err)
		}
	}
	return nil
}

// Observe reports every replica of the gang, in GangSpec order.
func (b *Backend) Observe(ctx context.Context, ref activities.GangRef) (activities.GangStatus, error) {
	if err := ctx.Err(); err != nil {
		return activities.GangStatus{}, err
	}
	dir := b.gangDir(ref.ID())
	st, err := readState(dir)
	if err != nil {
		return activities.GangStatus{}, err
	}
	stopped := exists(filepath.Join(dir, stoppedFile))
	out := activities.GangStatus{Replicas: make([]schemas.ReplicaStatus, 0, len(st.Spec.Replicas))}
	for _, r := range st.Spec.Replicas {
		s, err := b.replicaStatus(ref.ID(), dir, r, stopped)
		if err != nil {
			return activities.GangStatus{}, err
		}
		out.Replicas = append(out.Replicas, s)
	}
	return out, nil
}

// replicaStatus derives one replica's state from disk, and from memory for the
// processes this Backend started.
func (b *Backend) replicaStatus(id, dir string, r activities.ReplicaSpec, gangStopped bool) (schemas.ReplicaStatus, error) {
	s := schemas.ReplicaStatus{Name: r.Name, Role: r.Role, Index: r.Index, Phase: schemas.ReplicaPending}
	rdir := filepath.Join(dir, r.Name)
	ex, err := readExit(rdir)
	if err != nil {
		return s, err
	}
	// Disk before memory: Launch marks a replica claimed in memory before creating its
	// directory, so a directory seen here is never mistaken for another worker's.
	dirExists := exists(rdir)
	p, claimedHere := b.inMemory(id, r.Name)
	switch {
	case ex == nil && p == nil && claimedHere:
		return s, nil // a concurrent Launch is starting it
	case ex == nil && p == nil && !dirExists:
		if gangStopped {
			s.Phase, s.Message = schemas.ReplicaStopped, "stopped before it started"
		}
		return s, nil
	}
	s.Node = b.node
	if p != nil {
		s.StartTime = ptr(p.start)
	} else if fi, err := os.Stat(filepath.Join(rdir, pidFile)); err == nil {
		s.StartTime = ptr(fi.ModTime().UTC())
	}
	switch {
	case ex != nil:
		s.Phase, s.ExitCode, s.Message = ex.phase()
		s.FinishTime = ptr(ex.Time)
	case p != nil:
		s.Phase = schemas.ReplicaRunning
	default:
		// Claimed by a previous worker process and never finished: it died with that
		// worker (parent-death signal), and nobody is left to reap it or read its output.
		s.Phase, s.Message = schemas.ReplicaFailed, LostMessage
	}
	return s, nil
}

// Stop sends SIGTERM to the process group of every running replica, SIGKILL to those
// still running after the grace period, and returns once all are reaped. Replicas not
// started yet never will be. Stopping an unknown or finished gang does nothing.
func (b *Backend) Stop(ctx context.Context, ref activities.GangRef) error {
	id := ref.ID()
	if !exists(filepath.Join(b.gangDir(id), stateFile)) && b.lookupGangProcs(id) == nil {
		return nil
	}
	gp := b.lockGang(id)
	defer gp.op.Unlock()
	return b.stopLocked(ctx, id, gp)
}

// stopLocked is Stop with gp.op held.
func (b *Backend) stopLocked(ctx context.Context, id string, gp *gangProcs) error {
	dir := b.gangDir(id)
	if exists(filepath.Join(dir, stateFile)) {
		if err := writeFileAtomic(filepath.Join(dir, stoppedFile), []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n")); err != nil {
			return fmt.Errorf("local: stop %s: %w", id, err)
		}
		// Replicas a previous worker started died with it, but what they started in turn
		// may not have (the parent-death signal reaches only the direct child).
		b.killLeftovers(id, dir)
	}

	b.mu.Lock()
	procs := make([]*proc, 0, len(gp.procs))
	for _, p := range gp.procs {
		procs = append(procs, p)
	}
	b.mu.Unlock()

	for _, p := range procs {
		p.signal(sigTerm)
	}
	grace := time.NewTimer(b.grace)
	defer grace.Stop()
	if done, err := waitDone(ctx, procs, grace.C); err != nil {
		return err
	} else if done {
		return nil
	}
	for _, p := range procs {
		p.signal(sigKill)
	}
	_, err := waitDone(ctx, procs, nil)
	return err
}

// waitDone waits until every process is reaped (true), timeout fires (false) or ctx
// ends (its error).
func waitDone(ctx context.Context, procs []*proc, timeout <-chan time.Time) (bool, error) {
	for _, p := range procs {
		select {
		case <-p.done:
		case <-timeout:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return true, nil
}

// Cleanup stops the gang and removes its state directory, logs included.
func (b *Backend) Cleanup(ctx context.Context, ref activities.GangRef) error {
	id := ref.ID()
	if !exists(filepath.Join(b.gangDir(id), stateFile)) && b.lookupGangProcs(id) == nil {
		return nil
	}
	gp := b.lockGang(id)
	defer gp.op.Unlock()
	if err := b.stopLocked(ctx, id, gp); err != nil {
		return err
	}
	if err := os.RemoveAll(b.gangDir(id)); err != nil {
		return fmt.Errorf("local: cleanup %s: %w", id, err)
	}
	// Forget the gang; lockGang makes anyone already waiting for gp start over.
	b.mu.Lock()
	delete(b.gangs, id)
	b.mu.Unlock()
	return nil
}

// lockGang returns gang id's in-memory record with its op lock held. It retries when
// Cleanup dropped the record while we waited for the lock, so processes are never
// recorded in a record nobody can find.
func (b *Backend) lockGang(id string) *gangProcs {
	for {
		gp := b.gangProcs(id)
		gp.op.Lock()
		b.mu.Lock()
		current := b.gangs[id] == gp
		b.mu.Unlock()
		if current {
			return gp
		}
		gp.op.Unlock()
	}
}

// gangProcs returns the in-memory record of gang id, creating it.
func (b *Backend) gangProcs(id string) *gangProcs {
	b.mu.Lock()
	defer b.mu.Unlock()
	gp := b.gangs[id]
	if gp == nil {
		gp = &gangProcs{procs: map[string]*proc{}, claimed: map[string]bool{}}
		b.gangs[id] = gp
	}
	return gp
}

// lookupGangProcs returns the in-memory record of gang id, or nil.
func (b *Backend) lookupGangProcs(id string) *gangProcs {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gangs[id]
}

// proc returns the process this Backend started for a replica, or nil.
func (b *Backend) proc(id, name string) *proc {
	p, _ := b.inMemory(id, name)
	return p
}

// inMemory returns the process this Backend started for a replica (or nil), and whether
// this Backend claimed the replica.
func (b *Backend) inMemory(id, name string) (*proc, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gp := b.gangs[id]; gp != nil {
		return gp.procs[name], gp.claimed[name]
	}
	return nil, false
}

// setClaimed records whether this Backend claimed a replica of gp.
func (b *Backend) setClaimed(gp *gangProcs, name string, claimed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if claimed {
		gp.claimed[name] = true
	} else {
		delete(gp.claimed, name)
	}
}

// gangDir is the gang's state directory. IDs that are not a single path element (which
// validate refuses at Launch) map to a path that never exists.
func (b *Backend) gangDir(id string) string {
	if !isPathElem(id) {
		return filepath.Join(b.stateDir, ".invalid", "-")
	}
	return filepath.Join(b.stateDir, id)
}

// environ is a replica's environment. Later entries win (os/exec keeps the last of
// duplicate names): the worker's, then PWD, then WithEnv's, then the replica's, then the
// framework's, then the marker Stop uses to find leftovers.
func (b *Backend) environ(r activities.ReplicaSpec, fwEnv []schemas.EnvVar, rdir string) []string {
	// os/exec sets PWD to the command's Dir only when it builds the environment itself;
	// the worker's PWD would tell the replica it runs where the worker does.
	env := append(os.Environ(), "PWD="+b.workingDir(r.WorkingDir))
	for _, list := range [][]schemas.EnvVar{b.env, r.Env, fwEnv} {
		for _, e := range list {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return append(env, replicaMarker+"="+rdir)
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
func (b *Backend) loadOrInitState(dir string, spec activities.GangSpec, portNames []string) (gangState, error) {
	st, err := readState(dir)
	switch {
	case err == nil:
		same, err := sameSpec(st.Spec, spec)
		if err != nil {
			return st, err
		}
		if !same {
			return st, invalidSpec(fmt.Errorf("local: gang %s was launched with a different spec", spec.ID()))
		}
		return st, nil
	case !errors.Is(err, activities.ErrGangNotFound):
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

// allocatePorts asks the kernel for a free loopback port per name. All listeners stay
// open until every port is chosen so no two names get the same port. Another program may
// still take a port before rank 0 binds it; acceptable for a single host.
func allocatePorts(names []string) (map[string]int, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ports := make(map[string]int, len(names))
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for _, name := range names {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("local: allocate port %q: %w", name, err)
		}
		ls = append(ls, l)
		ports[name] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// endpoints are the local backend's addresses: every replica is on loopback.
type endpoints map[string]int

// Host returns 127.0.0.1.
func (endpoints) Host(string, int) string { return "127.0.0.1" }

// Port returns the gang's port with that name, or 0.
func (e endpoints) Port(name string) int { return e[name] }

// validate refuses gangs that cannot be laid out on disk or run.
func validate(spec activities.GangSpec) error {
	if !isPathElem(spec.ID()) {
		return fmt.Errorf("local: gang id %q is not a valid directory name", spec.ID())
	}
	names := map[string]bool{}
	for i, r := range spec.Replicas {
		switch {
		case !isPathElem(r.Name):
			return fmt.Errorf("local: replicas[%d].name %q is not a valid directory name", i, r.Name)
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

// invalidSpec marks err as a spec problem that retrying will not fix.
func invalidSpec(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypeInvalidSpec, err)
}

func ptr[T any](v T) *T { return &v }

// killLeftovers kills what remains of replicas that a previous worker process started:
// the parent-death signal killed each replica's main process, not the processes it
// started (torchrun's workers, for one). A group is killed only if one of its live
// members carries the replica's marker, so a reused process group id is never hit.
func (b *Backend) killLeftovers(id, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || b.proc(id, e.Name()) != nil {
			continue
		}
		rdir := filepath.Join(dir, e.Name())
		if exists(filepath.Join(rdir, exitFile)) {
			continue
		}
		if pgid := readPid(rdir); pgid > 0 && groupHasMarker(pgid, replicaMarker+"="+rdir) {
			killGroup(pgid)
		}
	}
}
