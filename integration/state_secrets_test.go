package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend/local"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// TestNoSharedSecrets: a stack as `dlc up` runs one (storage isolation, NATS over TLS,
// and the local sandbox where the host has it) keeps no secret that another
// installation shares, and none where another local user could read it (issue 33,
// findings 3 and 6):
//   - the S3 gateway's root keys are this installation's own, generated into the state
//     directory (s3-root-keys.json, 0600) and the same after a restart on it;
//   - the state directory's files are mode 0600 and its directories 0700 — Temporal's
//     database, the JetStream store, the S3 objects and accounts, every log, the local
//     backend's replicas — listed after a job wrote checkpoints and while a sandboxed
//     MPI gang runs (its /etc files and hostfile are its workspace user's, 0600);
//   - no log (of the state directory, compressed log archives included) and no command
//     line of a process of the stack (/proc/<pid>/cmdline, which every local user
//     reads: the servers, the supervisors and the sandboxed replicas) holds the S3 root
//     keys, a NATS password, the admin token, the S3 accounts' key or a workspace's S3
//     secret; and no other file holds a secret but the one that keeps it.
func TestNoSharedSecrets(t *testing.T) {
	t.Parallel()
	ctx := itest.Context(t, 6*time.Minute)
	sandbox := local.SandboxAvailable() == nil
	wd := sandboxWorkDir(t)
	cfg := embedded.Config{Dir: filepath.Join(t.TempDir(), "state"), APIAddr: "127.0.0.1:0", WorkDir: wd,
		StorageIsolation: true, Sandbox: sandbox, NATSTLS: true, Logger: itest.Logger(slog.LevelError)}
	e, err := embedded.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := itest.AdminClient(t, e)
	const ws = "no-shared-secrets"
	closed, gangStopped := false, false
	t.Cleanup(func() {
		if !gangStopped { // the test failed: its replicas outlive the stack
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := c.StopJob(ctx, ws, "gang", "the test failed"); err == nil {
				_, _ = c.WaitJob(ctx, ws, "gang", time.Second, nil)
			}
		}
		if !closed {
			_ = e.Close()
		}
	})

	// A job that writes checkpoints to S3, to the end (its log archive too).
	uri := "s3://dlc/workspaces/" + ws + "/ckpt"
	itest.Submit(t, ctx, c, itest.JobDoc("train", ws, fmt.Sprintf(`
  framework: pytorch
  command: [./trainer, --epochs, "3"]
  roles: {worker: {replicas: 2}}
  checkpoint: {uri: %s}
`, uri)))
	if j := itest.WaitJob(t, ctx, c, ws, "train", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() }); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("train: %s %s", j.Status.Phase, j.Status.Message)
	}
	// An MPI gang that runs while the state directory is listed: its hostfile and, in
	// the sandbox, its /etc files and network namespace are there.
	itest.Submit(t, ctx, c, itest.JobDoc("gang", ws, `
  framework: mpi
  roles:
    launcher: {replicas: 1, command: [sh, -c, 'cat "$OMPI_MCA_orte_default_hostfile" && echo x > /tmp/own && echo ready && exec sleep 600']}
    worker: {replicas: 2, command: [sleep, "600"]}
`))
	testutil.Eventually(t, itest.Left(ctx), "the gang's launcher says ready", func() bool {
		ready := false
		_ = c.Logs(ctx, ws, "gang", dlc.LogOptions{}, func(r events.LogRecord) error {
			ready = ready || r.Line == "ready"
			return nil
		})
		return ready
	}, itest.PollInterval)

	ws3, err := e.S3CredentialsFor(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	accountsKey, err := os.ReadFile(filepath.Join(e.Dir, embedded.S3AccountsKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	s3 := e.Stack.S3
	// Each secret, and the files that keep it (relative to the state directory).
	type secret struct {
		value   string
		keptIn  []string
		idOnly  bool // an identifier rather than a secret: only logs and command lines are checked
		present bool
	}
	secrets := map[string]*secret{
		"the S3 root access key":         {value: s3.AccessKey, idOnly: true},
		"the S3 root secret key":         {value: s3.SecretKey, keptIn: []string{"s3" + devstack.S3RootKeysSuffix}},
		"the admin token":                {value: e.AdminToken, keptIn: []string{"admin-token"}},
		"the server's NATS password":     {value: e.Stack.NATS.Password(devstack.NATSUserServer), keptIn: []string{"nats/" + devstack.NATSUsersFile}},
		"the worker's NATS password":     {value: e.Stack.NATS.Password(devstack.NATSUserWorker), keptIn: []string{"nats/" + devstack.NATSUsersFile}},
		"the S3 gateway's NATS password": {value: e.Stack.NATS.Password(devstack.NATSUserS3), keptIn: []string{"nats/" + devstack.NATSUsersFile}},
		"the S3 accounts' key":           {value: strings.TrimSpace(string(accountsKey)), keptIn: []string{embedded.S3AccountsKeyFile}},
		"the workspace's S3 secret key":  {value: ws3.SecretAccessKey, keptIn: []string{"s3-iam/"}},
	}
	for what, s := range secrets {
		if len(s.value) < 16 {
			t.Fatalf("%s: %q is no secret", what, s.value)
		}
	}
	if s3.AccessKey == "dlcdev" || s3.SecretKey == "dlcdev-secret-key" {
		t.Fatal("the S3 gateway runs with the former fixed keys")
	}

	// check checks the state directory's modes, every file's content and the command
	// lines; gang says whether the MPI gang runs.
	check := func(when string, gang bool) {
		t.Helper()
		modes := checkStateModes(t, e.Dir)
		t.Logf("%s: %s", when, modes)

		// Every file's content (log archives decompressed).
		var logs []string
		err := filepath.WalkDir(e.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() || isNsfs(p) {
				return nil
			}
			rel, _ := filepath.Rel(e.Dir, p)
			isLog := strings.Contains(filepath.Base(p), ".log")
			if isLog {
				logs = append(logs, rel)
			}
			data, err := readMaybeGzip(p)
			if err != nil {
				if os.IsPermission(err) || os.IsNotExist(err) {
					return nil // a replica's own /tmp, gone meanwhile
				}
				return err
			}
			for what, s := range secrets {
				if !bytes.Contains(data, []byte(s.value)) {
					continue
				}
				kept := slices.ContainsFunc(s.keptIn, func(k string) bool { return rel == k || (strings.HasSuffix(k, "/") && strings.HasPrefix(rel, k)) })
				switch {
				case kept:
					s.present = true
				case isLog:
					t.Errorf("%s: the log %s holds %s", when, rel, what)
				case !s.idOnly:
					t.Errorf("%s: %s holds %s (kept in %v only)", when, rel, what, s.keptIn)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for what, s := range secrets {
			if len(s.keptIn) > 0 && !s.present {
				t.Errorf("%s: %s is not in %v: the probe is broken", when, what, s.keptIn)
			}
		}
		slices.Sort(logs)
		t.Logf("%s: %d logs grepped: %v", when, len(logs), logs)

		// The command line of every process of the stack: this one (NATS is embedded)
		// and everything below it.
		procs := descendants(t, os.Getpid())
		var servers []string
		for _, pid := range procs {
			cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if err != nil {
				continue // ended meanwhile
			}
			for _, name := range []string{"versitygw", "temporal", "bwrap", "sleep 600"} {
				if bytes.Contains(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), []byte(name)) {
					servers = append(servers, name)
				}
			}
			for what, s := range secrets {
				if bytes.Contains(cmdline, []byte(s.value)) {
					t.Errorf("%s: the command line of process %d holds %s: %q", when, pid, what, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
				}
			}
		}
		want := []string{"versitygw", "temporal"}
		if gang {
			want = append(want, "sleep 600")
			if sandbox {
				want = append(want, "bwrap")
			}
		}
		for _, name := range want {
			if !slices.Contains(servers, name) {
				t.Errorf("%s: no process of the stack runs %s: the probe is broken", when, name)
			}
		}
		t.Logf("%s: %d command lines checked", when, len(procs))
	}
	check("while the gang runs", true)

	if _, err := c.StopJob(ctx, ws, "gang", "done"); err != nil {
		t.Fatal(err)
	}
	itest.WaitJob(t, ctx, c, ws, "gang", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	gangStopped = true

	// A restart keeps the keys, and the objects they guard.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	again := itest.StartStack(t, ctx, cfg)
	if a := again.Stack.S3; a.AccessKey != s3.AccessKey || a.SecretKey != s3.SecretKey {
		t.Error("the S3 root keys changed across a restart on the same state directory")
	}
	e = again
	check("after a restart", false)
}

// stateModes counts what checkStateModes saw.
type stateModes struct {
	files, dirs, replicaTmp, nsfs int
	sandboxUser                   int // files and directories a sandbox user owns
}

func (m stateModes) String() string {
	return fmt.Sprintf("%d files 0600 and %d directories 0700 (%d of them the sandbox user's), %d network namespace handles, %d replicas' /tmp not listed",
		m.files, m.dirs, m.sandboxUser, m.nsfs, m.replicaTmp)
}

// checkStateModes fails the test for every file of the state directory dir that its
// group or others may read, write or run, and every directory but 0700. Not listed: a
// replica's /tmp (a directory 0700 of its workspace's user, the replica's own), and the
// mounts of gangs' network namespaces (nsfs, whose mode is the kernel's, 0444, and
// which hold no data).
func checkStateModes(t *testing.T, dir string) stateModes {
	t.Helper()
	var m stateModes
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed meanwhile
			}
			return err
		}
		fi, err := os.Lstat(p)
		if os.IsNotExist(err) {
			return nil // removed meanwhile
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil
		}
		if isNsfs(p) {
			m.nsfs++
			return nil
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		byUser := st != nil && st.Uid >= local.DefaultFirstUID
		if byUser {
			m.sandboxUser++
		}
		perm := fi.Mode().Perm()
		switch {
		case fi.IsDir() && perm != 0o700:
			t.Errorf("%s: mode %v, want 0700", p, fi.Mode())
		case !fi.IsDir() && perm&0o077 != 0:
			t.Errorf("%s: mode %v, want 0600 or less", p, fi.Mode())
		}
		if fi.IsDir() {
			m.dirs++
			if byUser && d.Name() == "tmp" {
				m.replicaTmp++
				return fs.SkipDir
			}
		} else {
			m.files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// isNsfs reports whether path is a mount of a namespace (nsfs), as a gang's network
// namespace is kept.
func isNsfs(path string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(path, &st) == nil && st.Type == 0x6e736673 // NSFS_MAGIC
}

// readMaybeGzip reads a file, decompressed when it is gzip.
func readMaybeGzip(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		return data, err
	}
	z, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return data, nil //nolint:nilerr // not gzip after all: its bytes as they are
	}
	defer z.Close()
	plain, err := io.ReadAll(z)
	if err != nil {
		return data, nil //nolint:nilerr // a damaged archive: its bytes as they are
	}
	return append(data, plain...), nil
}

// descendants are the processes below pid, and pid itself, from /proc.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	for _, en := range entries {
		p, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}
