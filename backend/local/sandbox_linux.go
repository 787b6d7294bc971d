//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SandboxAvailable returns why WithSandbox cannot run replicas on this host (not root,
// bwrap missing, namespaces refused), or nil. It starts one sandboxed process to find
// out.
func SandboxAvailable() error {
	s := &sandbox{Sandbox: Sandbox{FirstUID: DefaultFirstUID}}
	return s.init(nil)
}

// init finds the programs of the chain, resolves the hidden directories (hide, and
// Hide), and starts one sandboxed process (true) to check that the host gives
// everything the sandbox needs.
func (s *sandbox) init(hide []string) error {
	if os.Geteuid() != 0 {
		return errors.New("the sandbox needs root: it runs each workspace's replicas as a user of their own, in namespaces it mounts")
	}
	for _, p := range []struct {
		path *string
		name string
		pkg  string
	}{{&s.bwrap, "bwrap", "bubblewrap"}, {&s.nsenter, "nsenter", "util-linux"}, {&s.setpriv, "setpriv", "util-linux"}, {&s.env, "env", "coreutils"}} {
		path, err := exec.LookPath(p.name)
		if err == nil {
			path, err = filepath.Abs(path)
		}
		if err != nil {
			return fmt.Errorf("the sandbox needs %s (Debian package %s): %w", p.name, p.pkg, err)
		}
		*p.path = path
	}
	for _, h := range append(hide, s.Hide...) {
		resolved, err := filepath.EvalSymlinks(h)
		if errors.Is(err, os.ErrNotExist) {
			continue // nothing to see
		}
		if err != nil {
			return fmt.Errorf("sandbox: hidden directory: %w", err)
		}
		s.hide = append(s.hide, resolved)
	}
	return s.probe()
}

// probe runs true in a sandbox as a replica's would be, in a network namespace of its
// own, and returns what went wrong.
func (s *sandbox) probe() (err error) {
	dir, err := os.MkdirTemp("", "opendlc-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("sandbox probe: %w", err)
	}
	defer os.RemoveAll(dir)
	const nobody = 65534
	g := &gangSandbox{sb: s, uid: nobody, netns: filepath.Join(dir, netnsFile), etc: filepath.Join(dir, sandboxEtcDir)}
	if err := newNetns(g.netns); err != nil {
		return fmt.Errorf("sandbox probe: network namespace: %w", err)
	}
	defer func() { _ = removeNetns(g.netns) }()
	if err := writeSandboxEtc(g.etc, "probe", nobody); err != nil {
		return fmt.Errorf("sandbox probe: %w", err)
	}
	argv, err := g.command(filepath.Join(dir, "replica"), "/usr", []string{"true"})
	if err != nil {
		return fmt.Errorf("sandbox probe: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("sandbox probe: %s: %w: %s", filepath.Base(s.bwrap), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetns creates a network namespace with its loopback interface up, and keeps it
// at path (a bind mount of the namespace, as ip-netns(8) keeps them) until
// removeNetns.
func newNetns(path string) error {
	// The mount point, which the namespace covers (mode 0444, the kernel's, while it is
	// mounted: it holds no data).
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return err
	}
	enter := func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		return nil
	}
	return inNetns(enter, func() error {
		if err := loopbackUp(); err != nil {
			return err
		}
		self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", path, err)
		}
		return nil
	})
}

// inNetns runs fn on an OS thread that enter moves into another network namespace,
// locked to it, and moves the thread back into the worker's before unlocking it, so no
// other goroutine ever runs there. A thread that cannot be moved back stays locked, and
// Go ends it with the goroutine (which also kills the children it forked with a parent
// death signal, the stack's servers: a last resort).
func inNetns(enter, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer own.Close()
		err = enter()
		if err == nil {
			err = fn()
		}
		if back := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); back != nil {
			done <- errors.Join(err, fmt.Errorf("back to the worker's network namespace: %w", back))
			return // locked: Go ends the thread
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// loopbackUp brings the calling thread's network namespace's lo up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

// isNetns reports whether path holds a network namespace (newNetns's bind mount).
func isNetns(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// removeNetns unmounts the namespace kept at path and removes the file. The namespace
// itself ends once no process and no socket is left in it.
func removeNetns(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("local: unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("local: %w", err)
	}
	return nil
}

// serveForwards makes sure this Backend serves the sandbox's forwards in the network
// namespace of the gang in dir, if it has one: Launch opens them, and Observe opens
// them again in a worker that restarted. It also closes those of gangs whose namespace
// is gone. Several Backends may serve the same gang (SO_REUSEPORT); any one suffices.
func (b *Backend) serveForwards(dir string) error {
	if b.sb == nil || len(b.sb.Forward) == 0 {
		return nil
	}
	b.fwdMu.Lock()
	defer b.fwdMu.Unlock()
	if _, ok := b.fwds[dir]; ok {
		return nil
	}
	for d, lns := range b.fwds {
		if !isNetns(filepath.Join(d, netnsFile)) {
			closeAll(lns)
			delete(b.fwds, d)
		}
	}
	ns := filepath.Join(dir, netnsFile)
	if !isNetns(ns) {
		return nil
	}
	var lns []net.Listener
	for _, addr := range b.sb.Forward {
		ln, err := listenIn(ns, addr)
		if err != nil {
			closeAll(lns)
			return fmt.Errorf("local: sandbox of %s: forward %s: %w", filepath.Base(dir), addr, err)
		}
		lns = append(lns, ln)
		go forward(ln, addr)
	}
	b.fwds[dir] = lns
	return nil
}

// closeForwards closes this Backend's forwards into the gang in dir.
func (b *Backend) closeForwards(dir string) {
	b.fwdMu.Lock()
	defer b.fwdMu.Unlock()
	closeAll(b.fwds[dir])
	delete(b.fwds, dir)
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

// listenIn listens on addr (TCP, SO_REUSEPORT) in the network namespace kept at ns.
// The socket stays in that namespace whichever thread accepts on it.
func listenIn(ns, addr string) (ln net.Listener, err error) {
	f, err := os.Open(ns)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	enter := func() error {
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns: %w", err)
		}
		return nil
	}
	err = inNetns(enter, func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			return serr
		}}
		ln, err = lc.Listen(context.Background(), "tcp", addr)
		return err
	})
	return ln, err
}

// forward copies every connection accepted on ln to addr, dialled from the worker's
// own network namespace, until ln is closed.
func forward(ln net.Listener, addr string) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of file descriptors, say: try again shortly
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go func() {
			defer c.Close()
			u, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			half := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				_ = dst.(*net.TCPConn).CloseWrite()
				done <- struct{}{}
			}
			go half(u, c)
			go half(c, u)
			<-done
			<-done
		}()
	}
}
