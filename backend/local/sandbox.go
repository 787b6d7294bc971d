package local

// Sandboxed replicas (WithSandbox)
//
// Without a sandbox a replica is a process of the worker's user with the worker's
// environment: it reads whatever the worker can read (the stack's state directory, with
// the admin token and the NATS passwords) and connects to whatever the worker can reach
// (Temporal, NATS, the API). On a stack that several workspaces share, that makes every
// member an admin. With WithSandbox every replica runs in a sandbox made of Linux
// namespaces by bubblewrap (bwrap), and reaches what the training contract gives it and
// nothing else:
//
//   - User. Each workspace has a user id of its own, recorded in
//     <stateDir>/.sandbox-users.json (FirstUID, FirstUID+1, ... in order of first use),
//     in no group but its own and in no /etc/passwd of the host. A replica runs as its
//     workspace's user, with no capabilities and no_new_privs (a setuid program gives it
//     nothing), so file permissions protect the host from it as from any unprivileged
//     user, and one workspace's replicas from another's.
//   - Files. A replica sees a root of its own: the host's /usr, /etc, /opt and /sys
//     read-only (and /bin, /lib... as the host has them); its working directory
//     read-only at its path, and the program its command names when that is a path
//     outside the directories it sees; a private /tmp, also /var/tmp and HOME (the
//     directory tmp/ in the replica's state directory, owned by the workspace's user,
//     kept across a replacement of the replica, removed with the gang); /dev with the
//     null devices, a private /dev/shm and the host's GPU devices; /proc of its own pid
//     namespace; /etc/passwd, /etc/group and /etc/hosts that name its user and map the
//     host name to loopback; the framework's files (an MPI hostfile) at
//     /run/opendlc/files/<dir>. Nothing else: no /home, /root, /var, /run, /srv, /mnt.
//     The state directory (the local backend's, and every Sandbox.Hide path: the whole
//     stack's directory, the admin token's file) is never visible: a working directory
//     or program inside it is refused, and where it lies inside a directory that is
//     visible an empty tmpfs (for a file, /dev/null) covers it. A working directory or program is bound only when every directory above
//     it lets any user through (o+x), so a bind never shows what the workspace's user
//     could not reach on the host.
//   - Processes. A pid namespace per replica: the replica sees its own processes only,
//     and cannot see or signal the worker, the servers or other replicas (nor read
//     their /proc/<pid>/environ or cmdline). When its main process ends, the kernel
//     kills every process left in the namespace, daemons included. IPC, UTS and cgroup
//     namespaces of its own too (the host name stays the host's).
//   - Environment. Not the worker's: PATH, the locale (LANG, LC_*, TZ), HOME=/tmp and
//     USER and LOGNAME (dlc-<workspace>), then, as without the sandbox, WithEnv's (the
//     S3 endpoint and region), the workspace's (its S3 credentials), the job's own, the
//     framework's rendezvous variables and the GPUs'.
//   - Network. The replicas of a gang share a network namespace of their own, kept in
//     <gang dir>/netns (a bind mount that holds it while a replica may run: Stop,
//     Cleanup and an Observe that sees every replica ended unmount it). It has a
//     loopback interface and nothing else, so the rendezvous ports, on 127.0.0.1 as
//     without the sandbox, join the gang's replicas with each other and with nobody
//     else. Each Sandbox.Forward address (the S3 gateway's) is served inside it by the
//     worker: the worker listens on the same host:port in the gang's namespace (the
//     socket is made by a thread that enters the namespace and comes back) and copies
//     every connection to that address on the host, so DLC_S3_ENDPOINT is unchanged.
//     Nothing else has a route: Temporal, NATS, the API, other gangs, the host's other
//     services and the internet are unreachable. A replica's ways out are S3, with its
//     workspace's credentials, and its output, which the log forwarder reads. (A veth
//     pair to the host with firewall rules would do the same with routing, a firewall
//     and an address plan, and would reach everything a rule forgot; here nothing but
//     the forwards has a route at all.)
//
// How a replica starts: its supervisor (supervisorScript) runs outside the sandbox, as
// without it, and writes pid, output.log and exit in the replica's state directory,
// which the replica cannot see. What it execs is
//
//	env --ignore-signal=TERM nsenter --net=<gang dir>/netns -- bwrap <namespaces, mounts> --
//	    setpriv --reuid=U --regid=U --clear-groups --inh-caps=-all --bounding-set=-all -- env --default-signal=TERM -- <argv>
//
// bwrap, and the pid 1 it keeps in the new pid namespace, ignore SIGTERM, while the
// replica gets SIGTERM's default action back: Stop's SIGTERM to the process group (the
// sandbox's processes stay in the supervisor's session and group) reaches the replica
// itself and its grace period, as without the sandbox. bwrap exits with the replica's
// status, 128+N for a replica killed by signal N, so the exit file reads the same.
// Every process carries the replica's marker, so Stop's SIGKILL finds them as before;
// and the supervisor's SIGKILL to bwrap kills the whole namespace (--die-with-parent).
//
// Limits, which docs/security.md repeats:
//   - It needs Linux, root (the worker gives replicas other users and mounts their
//     namespaces), bwrap, and util-linux's nsenter and setpriv; SandboxAvailable says
//     what is missing, and WithSandbox fails New without them.
//   - Namespaces are not a virtual machine: a kernel bug can break out, and there is no
//     seccomp filter. There are no resource limits either: a replica can use every CPU,
//     all memory and disk (its /tmp is on the state directory's file system).
//   - GPUs: every /dev/nvidia* device is visible; CUDA_VISIBLE_DEVICES selects a
//     replica's, as without the sandbox, and a replica that ignores it can use others.
//   - The forwards live in the worker. While no worker runs, a replica's S3 requests
//     fail (its rendezvous does not); the next worker on the state directory serves them
//     again as soon as it launches or observes the gang.
//   - The job chooses its working directory (spec.workingDir): whatever the workspace's
//     user can read on the host below a directory it may name is readable. The working
//     directory is read-only: a replica writes /tmp, /dev/shm and S3, nothing else.
//   - A forward address must be a loopback IP (the embedded stack's S3 is); a remote S3
//     endpoint is unreachable from the sandbox.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Sandbox configures the sandbox of WithSandbox.
type Sandbox struct {
	// Forward are TCP addresses, host:port with a loopback IP, that replicas reach as
	// on the host: the S3 gateway's. Everything else on the host or the network is
	// unreachable from a replica.
	Forward []string
	// Hide are directories and files no replica may see, besides the local backend's
	// state directory: the stack's whole state directory, the admin token's file.
	Hide []string
	// FirstUID is the user id of the first workspace to run a replica; the next
	// workspace gets the next id. Default DefaultFirstUID.
	FirstUID int
}

// DefaultFirstUID is the first workspace's user id: 0x70000000, above the ranges that
// Linux distributions give users, systemd's dynamic users and the containers'
// subordinate ids (systemd's docs/UIDS-GIDS.md leaves 0x70000000-0x7FFDFFFF unused).
const DefaultFirstUID = 0x70000000

// WithSandbox runs every replica in a sandbox (see the comment of sandbox.go): as its
// workspace's own unprivileged user, in namespaces of its own, with a minimal
// environment, no view of the state directory and no network but its gang's loopback
// and s.Forward. New fails when the host cannot give it (SandboxAvailable).
func WithSandbox(s Sandbox) Option {
	return func(b *Backend) error {
		if s.FirstUID == 0 {
			s.FirstUID = DefaultFirstUID
		}
		if s.FirstUID < 1000 || s.FirstUID > 0x7FFF0000 {
			return fmt.Errorf("local: sandbox first uid %d: want 1000 to %d", s.FirstUID, 0x7FFF0000)
		}
		for _, a := range s.Forward {
			if err := checkForward(a); err != nil {
				return err
			}
		}
		b.sb = &sandbox{Sandbox: s}
		return nil
	}
}

// checkForward refuses a forward address that is not host:port with a loopback IP.
func checkForward(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	ip := net.ParseIP(host)
	if err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("local: sandbox forward %q: want host:port with a loopback IP", addr)
	}
	return nil
}

// sandbox is WithSandbox's configuration, completed by New (sandboxInit).
type sandbox struct {
	Sandbox
	// hide are the directories no replica sees, with symbolic links resolved: Hide and
	// the state directory.
	hide []string
	// The programs of the chain that starts a replica, as absolute paths.
	env, nsenter, bwrap, setpriv string
}

// Names in the state directory and a gang's directory that belong to the sandbox.
const (
	sandboxUsersFile = ".sandbox-users.json"
	sandboxUsersLock = ".sandbox-users.lock"
	netnsFile        = "netns"       // in a gang's directory: its network namespace
	sandboxEtcDir    = "sandbox-etc" // in a gang's directory: passwd, group, hosts
	replicaTmpDir    = "tmp"         // in a replica's directory: its /tmp
	// sandboxFilesDir is where replicas see their gang's framework files.
	sandboxFilesDir = "/run/opendlc/files"
)

// sandboxUsers is .sandbox-users.json: each workspace's user id.
type sandboxUsers struct {
	Workspaces map[string]int `json:"workspaces"`
}

// sandboxUser returns the user id of workspace ws, giving it the next free one on its
// first use. Every Backend on the state directory agrees: the file is changed under an
// flock.
func (b *Backend) sandboxUser(ctx context.Context, ws string) (int, error) {
	f, err := os.OpenFile(filepath.Join(b.stateDir, sandboxUsersLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fmt.Errorf("local: sandbox users: %w", err)
	}
	defer f.Close()
	if err := flock(ctx, f); err != nil {
		return 0, fmt.Errorf("local: sandbox users: %w", err)
	}
	path := filepath.Join(b.stateDir, sandboxUsersFile)
	users := sandboxUsers{Workspaces: map[string]int{}}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &users); err != nil {
			return 0, fmt.Errorf("local: %s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("local: sandbox users: %w", err)
	}
	if uid, ok := users.Workspaces[ws]; ok {
		return uid, nil
	}
	if users.Workspaces == nil {
		users.Workspaces = map[string]int{}
	}
	uid := b.sb.FirstUID
	for _, u := range users.Workspaces {
		uid = max(uid, u+1)
	}
	users.Workspaces[ws] = uid
	if data, err = json.MarshalIndent(users, "", "  "); err != nil {
		return 0, fmt.Errorf("local: %w", err)
	}
	if err := writeFileAtomic(path, append(data, '\n')); err != nil {
		return 0, fmt.Errorf("local: sandbox users: %w", err)
	}
	return uid, nil
}

// sandboxUserName is the name of workspace ws's user in the sandbox's /etc/passwd.
func sandboxUserName(ws string) string { return "dlc-" + ws }

// sandboxEnv is what a sandboxed replica's environment starts from, in place of the
// worker's: PATH and the locale from the worker, and its user.
func sandboxEnv(ws string) []string {
	env := []string{"PATH=" + defaultPath}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "PATH" || name == "LANG" || name == "LANGUAGE" || name == "TZ" || strings.HasPrefix(name, "LC_") {
			env = append(env, kv)
		}
	}
	user := sandboxUserName(ws)
	return append(env, "HOME=/tmp", "USER="+user, "LOGNAME="+user)
}

// gangSandbox is what the replicas of one gang share in the sandbox.
type gangSandbox struct {
	sb    *sandbox
	uid   int
	netns string // the network namespace's file
	etc   string // passwd, group and hosts
	files string // the framework's files; "" when it has none
}

// cannotRun is a replica the sandbox refuses to start (its working directory is
// hidden, say); Launch records it as a replica that cannot start.
type cannotRun struct{ error }

// prepareSandbox makes the gang's part of the sandbox, if it is not made yet: its
// workspace's user, its network namespace (with the forwards this Backend serves in
// it), its /etc files, and its framework files readable by the workspace's user. The
// gang is locked.
func (b *Backend) prepareSandbox(ctx context.Context, dir string, spec backend.GangSpec) (*gangSandbox, error) {
	uid, err := b.sandboxUser(ctx, spec.Workspace)
	if err != nil {
		return nil, err
	}
	g := &gangSandbox{sb: b.sb, uid: uid, netns: filepath.Join(dir, netnsFile), etc: filepath.Join(dir, sandboxEtcDir)}
	if !isNetns(g.netns) {
		if err := newNetns(g.netns); err != nil {
			return nil, fmt.Errorf("local: sandbox of %s: network namespace: %w", spec.ID(), err)
		}
	}
	if err := b.serveForwards(dir); err != nil {
		return nil, err
	}
	if err := writeSandboxEtc(g.etc, spec.Workspace, uid); err != nil {
		return nil, fmt.Errorf("local: sandbox of %s: %w", spec.ID(), err)
	}
	if files := filepath.Join(dir, filesDirName); exists(files) {
		if err := giveToUser(files, uid); err != nil {
			return nil, fmt.Errorf("local: sandbox of %s: %w", spec.ID(), err)
		}
		g.files = files
	}
	return g, nil
}

// tendSandbox keeps the network namespace of the gang in dir for as long as a replica
// may run in it, and no longer: Observe calls it. While a replica runs, a worker that
// restarted serves the forwards again; once every replica has ended, the namespace and
// its forwards are released (Stop and Cleanup release them too), so that no mount
// outlives the gang's processes. A Launch or scale in progress (the gang's lock is
// held) may start replicas: the namespace is then left to the next Observe.
func (b *Backend) tendSandbox(dir string, stopped bool, reps []schemas.ReplicaStatus) {
	ended := true
	for _, r := range reps {
		ended = ended && r.Phase.Terminal()
	}
	switch {
	case !ended && !stopped:
		_ = b.serveForwards(dir) // a failure is tried again at the next Observe
	case ended:
		held, cancel := context.WithCancel(context.Background())
		cancel() // lockGang only tries
		if unlock, err := lockGang(held, dir); err == nil {
			defer unlock()
			_ = b.releaseSandbox(dir)
		}
	}
}

// releaseSandbox closes this Backend's forwards into the gang in dir and removes its
// network namespace, once no replica runs in it.
func (b *Backend) releaseSandbox(dir string) error {
	b.closeForwards(dir)
	return removeNetns(filepath.Join(dir, netnsFile))
}

// giveToUser makes root, a directory of the gang that its replicas read (bound
// read-only), and everything in it the workspace's user's alone: owned by uid, with
// no permission for group or others, like every file of the state directory (on the
// host, the gang's directory above it is root's, 0700; the user reaches it only
// through the bind).
func giveToUser(root string, uid int) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			return err
		}
		return os.Chmod(p, fi.Mode().Perm()&0o700)
	})
}

// writeSandboxEtc writes the gang's /etc/passwd and /etc/group (the host's, with the
// workspace's user and group added) and /etc/hosts (localhost and the host name on
// loopback, the only interface there is) into dir, readable by the workspace's user
// only (giveToUser).
func writeSandboxEtc(dir, ws string, uid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	name, id := sandboxUserName(ws), strconv.Itoa(uid)
	host, _ := os.Hostname()
	files := map[string]string{
		"passwd": name + ":x:" + id + ":" + id + ":OpenDLC workspace " + ws + ":/tmp:/bin/sh\n",
		"group":  name + ":x:" + id + ":\n",
		"hosts":  "127.0.0.1\tlocalhost " + host + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	for f, add := range files {
		var base []byte
		if f != "hosts" {
			var err error
			if base, err = os.ReadFile(filepath.Join("/etc", f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if len(base) > 0 && base[len(base)-1] != '\n' {
				base = append(base, '\n')
			}
		}
		if err := writeFileAtomic(filepath.Join(dir, f), append(base, add...)); err != nil {
			return err
		}
	}
	return giveToUser(dir, uid)
}

// command returns the argv that runs argv as replica rdir in the sandbox, working in
// wd, after making the replica's /tmp. A *cannotRun error refuses the replica.
func (g *gangSandbox) command(rdir, wd string, argv []string) ([]string, error) {
	tmp := filepath.Join(rdir, replicaTmpDir)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := os.Chown(tmp, g.uid, g.uid); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	wd, err := g.sb.visible("working directory", wd)
	if err != nil {
		return nil, err
	}
	var m mounts
	for _, d := range []string{"/usr", "/etc", "/opt", "/sys"} {
		m.add(d, "--ro-bind-try", d, d)
	}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"} {
		if target, err := os.Readlink(d); err == nil {
			m.add(d, "--symlink", target, d)
		} else {
			m.add(d, "--ro-bind-try", d, d)
		}
	}
	m.add(wd, "--ro-bind", wd, wd)
	if filepath.IsAbs(argv[0]) && !m.shows(argv[0]) {
		prog, err := g.sb.visible("program", argv[0])
		if err != nil {
			return nil, err
		}
		if !m.shows(prog) {
			m.add(argv[0], "--ro-bind", prog, argv[0])
		}
	}
	for _, h := range g.sb.hide {
		switch fi, err := os.Stat(h); {
		case err != nil || !m.shows(h):
		case fi.IsDir():
			m.add(h, "--tmpfs", h)
		default:
			m.add(h, "--ro-bind", "/dev/null", h)
		}
	}
	m.add("/tmp", "--bind", tmp, "/tmp")
	m.add("/var/tmp", "--bind", tmp, "/var/tmp")
	m.add("/proc", "--proc", "/proc")
	m.add("/dev", "--dev", "/dev")
	gpus, _ := filepath.Glob("/dev/nvidia*")
	for _, d := range append(gpus, "/dev/dri", "/dev/infiniband") {
		m.add(d, "--dev-bind-try", d, d)
	}
	for _, f := range []string{"passwd", "group", "hosts"} {
		m.add("/etc/"+f, "--ro-bind", filepath.Join(g.etc, f), "/etc/"+f)
	}
	if g.files != "" {
		m.add(sandboxFilesDir, "--ro-bind", g.files, sandboxFilesDir)
	}
	uid := strconv.Itoa(g.uid)
	out := []string{g.sb.env, "--ignore-signal=TERM", g.sb.nsenter, "--net=" + g.netns, "--", g.sb.bwrap,
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
		// Only for setpriv, which drops them with root before the replica runs.
		"--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"}
	out = append(append(out, m.args()...), "--chdir", wd, "--",
		g.sb.setpriv, "--reuid="+uid, "--regid="+uid, "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
		g.sb.env, "--default-signal=TERM", "--")
	return append(out, argv...), nil
}

// visible resolves path (what names it, for errors) and refuses it if a replica may
// not see it: it lies in a hidden directory, or a directory above it does not let
// every user through.
func (s *sandbox) visible(what, path string) (string, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", cannotRun{fmt.Errorf("%s: %w", what, err)}
	}
	for _, h := range s.hide {
		if within(resolved, h) {
			return "", cannotRun{fmt.Errorf("%s %s lies in the stack's state directory, which the sandbox hides", what, path)}
		}
	}
	for d := filepath.Dir(resolved); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return "", cannotRun{fmt.Errorf("%s: %w", what, err)}
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return "", cannotRun{fmt.Errorf("%s %s: the workspace's user may not pass %s (mode %v): give the sandbox a %s any user can reach", what, path, d, fi.Mode().Perm(), what)}
		}
		if d == "/" {
			return resolved, nil
		}
	}
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// mounts are bwrap's mount options, applied shallowest destination first (in the
// order they were added among equally deep ones), so that a mount inside another
// (the working directory inside /tmp, a hidden directory inside the working
// directory) is made after it and stays visible.
type mounts struct {
	list []mount
	dirs map[string]bool // the directories made above destinations
}

type mount struct {
	dest string
	args []string
}

// add adds a mount at dest, and before it every directory above dest, which bwrap
// would otherwise make with mode 0700, closed to the workspace's user (an existing one,
// inside a bound directory, is left as it is).
func (m *mounts) add(dest string, args ...string) {
	dest = filepath.Clean(dest)
	var above []string
	for d := filepath.Dir(dest); d != "/" && !m.dirs[d]; d = filepath.Dir(d) {
		above = append(above, d)
	}
	if m.dirs == nil {
		m.dirs = map[string]bool{}
	}
	for _, d := range slices.Backward(above) {
		m.dirs[d] = true
		m.list = append(m.list, mount{dest: d, args: []string{"--perms", "0755", "--dir", d}})
	}
	m.list = append(m.list, mount{dest: dest, args: args})
}

// shows reports whether path lies in a host directory bound so far at its own path.
func (m *mounts) shows(path string) bool {
	for _, x := range m.list {
		if (x.args[0] == "--ro-bind" || x.args[0] == "--ro-bind-try") && within(path, x.dest) {
			return true
		}
	}
	return false
}

func (m *mounts) args() []string {
	depth := func(p string) int {
		if p == "/" {
			return 0
		}
		return strings.Count(p, "/")
	}
	sorted := slices.Clone(m.list)
	slices.SortStableFunc(sorted, func(a, b mount) int { return depth(a.dest) - depth(b.dest) })
	var out []string
	for _, x := range sorted {
		out = append(out, x.args...)
	}
	return out
}
