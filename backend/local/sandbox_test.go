//go:build linux

package local

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// probeEnv, when set, makes this test binary a probe (runProbe) instead of the tests:
// the sandbox tests run a copy of it as a replica. It holds a probePlan as JSON.
const probeEnv = "OPENDLC_LOCAL_SANDBOX_PROBE"

func init() {
	if plan := os.Getenv(probeEnv); plan != "" {
		runProbe(plan)
		os.Exit(0)
	}
}

// probePlan is what a probe tries.
type probePlan struct {
	Read  []string `json:"read,omitempty"`  // files to read, directories to list
	Dial  []string `json:"dial,omitempty"`  // TCP addresses to connect to
	HTTP  []string `json:"http,omitempty"`  // URLs to GET
	Write []string `json:"write,omitempty"` // files to create
	// Rendezvous: rank 0 listens at MASTER_ADDR:MASTER_PORT for every other rank,
	// which connects and says hello.
	Rendezvous bool `json:"rendezvous,omitempty"`
}

// probeReport is what a probe found, printed as "probe: <JSON>".
type probeReport struct {
	UID   int               `json:"uid"`
	Env   []string          `json:"env"`   // the names of its variables
	Procs int               `json:"procs"` // processes it sees in /proc
	Read  map[string]string `json:"read"`  // "ok" or the error
	Dial  map[string]string `json:"dial"`
	HTTP  map[string]string `json:"http"`
	Write map[string]string `json:"write"`
	Peers []string          `json:"peers,omitempty"` // what rank 0 heard
}

func runProbe(planJSON string) {
	var plan probePlan
	if err := json.Unmarshal([]byte(planJSON), &plan); err != nil {
		fmt.Println("probe: bad plan:", err)
		os.Exit(2)
	}
	rep := probeReport{UID: os.Getuid(), Read: map[string]string{}, Dial: map[string]string{}, HTTP: map[string]string{}, Write: map[string]string{}}
	outcome := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		rep.Env = append(rep.Env, name)
	}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				rep.Procs++
			}
		}
	}
	for _, p := range plan.Read {
		fi, err := os.Stat(p)
		if err == nil && fi.IsDir() {
			_, err = os.ReadDir(p)
		} else if err == nil {
			_, err = os.ReadFile(p)
		}
		rep.Read[p] = outcome(err)
	}
	for _, a := range plan.Dial {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err == nil {
			c.Close()
		}
		rep.Dial[a] = outcome(err)
	}
	for _, u := range plan.HTTP {
		r, err := (&http.Client{Timeout: 5 * time.Second}).Get(u)
		if err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			rep.HTTP[u] = strings.TrimSpace(string(b))
			continue
		}
		rep.HTTP[u] = err.Error()
	}
	for _, p := range plan.Write {
		rep.Write[p] = outcome(os.WriteFile(p, []byte("x"), 0o600))
	}
	if plan.Rendezvous {
		addr := net.JoinHostPort(os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"))
		world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
		if os.Getenv("RANK") == "0" {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				fmt.Println("probe: listen:", err)
				os.Exit(1)
			}
			for range world - 1 {
				c, err := ln.Accept()
				if err != nil {
					fmt.Println("probe: accept:", err)
					os.Exit(1)
				}
				line, _ := bufio.NewReader(c).ReadString('\n')
				rep.Peers = append(rep.Peers, strings.TrimSpace(line))
				c.Close()
			}
		} else {
			var c net.Conn
			var err error
			for range 200 {
				if c, err = net.Dial("tcp", addr); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				fmt.Println("probe: dial rank 0:", err)
				os.Exit(1)
			}
			fmt.Fprintf(c, "hello from rank %s\n", os.Getenv("RANK"))
			c.Close()
		}
	}
	out, _ := json.Marshal(rep)
	fmt.Println("probe: " + string(out))
}

// sandboxFixture is what the sandbox tests share: a working directory any user may
// enter, with a copy of this test binary as the probe program, and a listener on the
// host's loopback that stands for Temporal.
type sandboxFixture struct {
	wd, probe string
	temporal  string // a host address no replica may reach
}

func newSandboxFixture(t *testing.T) sandboxFixture {
	t.Helper()
	if err := SandboxAvailable(); err != nil {
		t.Fatalf("the sandbox tests need root and bubblewrap (`task deps` installs it): %v", err)
	}
	wd := t.TempDir()
	for _, d := range []string{wd, filepath.Dir(wd)} { // t.TempDir's directories are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(wd, "probe")
	if err := os.WriteFile(probe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return sandboxFixture{wd: wd, probe: probe, temporal: ln.Addr().String()}
}

// probeRep is a replica that runs the probe with plan.
func (f sandboxFixture) probeRep(t *testing.T, role string, index int, plan probePlan) backend.ReplicaSpec {
	t.Helper()
	data, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	r := rep(role, index, "./probe")
	r.Env = []schemas.EnvVar{{Name: probeEnv, Value: string(data)}}
	return r
}

// launchSandboxed launches g and cleans it up when the test ends: its network
// namespace is a mount, which the state directory's removal would trip over.
func launchSandboxed(t *testing.T, b *Backend, g backend.GangSpec) {
	t.Helper()
	t.Cleanup(func() {
		if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
			t.Error(err)
		}
	})
	if err := b.Launch(context.Background(), g); err != nil {
		t.Fatalf("Launch: %v", err)
	}
}

// report runs the gang to its end and returns each replica's probe report.
func (f sandboxFixture) report(t *testing.T, b *Backend, g backend.GangSpec) map[string]probeReport {
	t.Helper()
	launchSandboxed(t, b, g)
	st := waitFor(t, b, g.GangRef, "the probes end", terminal)
	if b.sb != nil && isNetns(filepath.Join(b.gangDir(g.ID()), netnsFile)) {
		t.Errorf("the gang's network namespace outlived its replicas")
	}
	out := map[string]probeReport{}
	for _, r := range st.Replicas {
		var text []string
		for _, l := range logs(t, b, g.GangRef, r.Name, 0) {
			text = append(text, l.Line)
			if j, ok := strings.CutPrefix(l.Line, "probe: "); ok {
				var rep probeReport
				if err := json.Unmarshal([]byte(j), &rep); err != nil {
					t.Fatalf("%s: %v: %s", r.Name, err, j)
				}
				out[r.Name] = rep
			}
		}
		if r.Phase != schemas.ReplicaSucceeded {
			t.Fatalf("%s: %s %s; output:\n%s", r.Name, r.Phase, r.Message, strings.Join(text, "\n"))
		}
	}
	return out
}

// TestSandboxHidesTheHost runs the same probe as a replica without the sandbox and in
// it: without, it reads a secret of the state directory and of the stack's directory
// (which lies in its working directory), sees the worker's variables and processes
// and connects to a server on the host's loopback; in the sandbox it does none of
// that, runs as its workspace's user, and reaches the forwarded address (S3's) only.
func TestSandboxHidesTheHost(t *testing.T) {
	f := newSandboxFixture(t)
	state := t.TempDir()
	stack := filepath.Join(f.wd, "stack") // the stack's state, inside the working directory
	for _, dir := range []string{state, stack} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte("dlc_secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hostTmp := filepath.Join(os.TempDir(), "opendlc-sandbox-test-"+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(hostTmp, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hostTmp) })
	mine := hostTmp + "-written" // the probe writes it in its /tmp: the host's without the sandbox
	t.Cleanup(func() { os.Remove(mine) })
	t.Setenv("OPENDLC_TEST_WORKER_SECRET", "the worker's")
	s3 := httpServer(t, "s3 answers")
	plan := probePlan{
		Read:  []string{filepath.Join(state, "admin-token"), filepath.Join(stack, "admin-token"), hostTmp},
		Dial:  []string{f.temporal},
		HTTP:  []string{"http://" + s3 + "/"},
		Write: []string{mine, filepath.Join(f.wd, "written")},
	}
	run := func(opts ...Option) probeReport {
		b, err := New(append([]Option{WithStateDir(state), WithNode("test-node"), WithBaseDir(f.wd)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		g := gangOf(t, schemas.FrameworkCustom, f.probeRep(t, "worker", 0, plan))
		if len(opts) > 0 {
			g.Attempt = 2
		}
		return f.report(t, b, g)[g.Replicas[0].Name]
	}

	// Without the sandbox, the fault: the probe reads the secrets and reaches the host.
	plain := run()
	t.Logf("without the sandbox: %+v", plain)
	for _, p := range plan.Read {
		if plain.Read[p] != "ok" {
			t.Errorf("without the sandbox, reading %s: %s, want ok (the probe is broken)", p, plain.Read[p])
		}
	}
	if plain.Dial[f.temporal] != "ok" || plain.UID != os.Getuid() || !slices.Contains(plain.Env, "OPENDLC_TEST_WORKER_SECRET") {
		t.Errorf("without the sandbox: %+v, want the worker's user, its variables and the host's loopback", plain)
	}

	sandboxed := run(WithSandbox(Sandbox{Forward: []string{s3}, Hide: []string{stack}}))
	t.Logf("in the sandbox: %+v", sandboxed)
	for _, p := range plan.Read {
		if sandboxed.Read[p] == "ok" {
			t.Errorf("in the sandbox, %s was read", p)
		}
	}
	if r := sandboxed.Dial[f.temporal]; !strings.Contains(r, "connection refused") {
		t.Errorf("in the sandbox, connecting to the host's %s: %s, want connection refused", f.temporal, r)
	}
	if r := sandboxed.HTTP["http://"+s3+"/"]; r != "s3 answers" {
		t.Errorf("in the sandbox, the forwarded %s answered %q, want %q", s3, r, "s3 answers")
	}
	if sandboxed.UID != DefaultFirstUID {
		t.Errorf("in the sandbox, uid %d, want the workspace's, %d", sandboxed.UID, DefaultFirstUID)
	}
	if slices.Contains(sandboxed.Env, "OPENDLC_TEST_WORKER_SECRET") {
		t.Errorf("in the sandbox, the worker's variables reached the replica: %v", sandboxed.Env)
	}
	if sandboxed.Procs > 3 { // bwrap's pid 1 and the probe
		t.Errorf("in the sandbox, the replica sees %d processes", sandboxed.Procs)
	}
	if sandboxed.Write[mine] != "ok" || sandboxed.Write[filepath.Join(f.wd, "written")] == "ok" {
		t.Errorf("in the sandbox, writes: %v, want /tmp only", sandboxed.Write)
	}
}

// TestSandboxGangRendezvousUsersAndStop: the replicas of a sandboxed gang meet on
// their loopback (the framework's MASTER_ADDR:MASTER_PORT); two workspaces run as two
// users; Stop's SIGTERM reaches a replica inside the sandbox, and a replica killed by a
// signal reads as killed by it.
func TestSandboxGangRendezvousUsersAndStop(t *testing.T) {
	f := newSandboxFixture(t)
	b := newBackend(t, WithBaseDir(f.wd), WithSandbox(Sandbox{}))

	plan := probePlan{Rendezvous: true}
	g := gangOf(t, schemas.FrameworkPyTorch, f.probeRep(t, "master", 0, plan), f.probeRep(t, "worker", 0, plan), f.probeRep(t, "worker", 1, plan))
	reps := f.report(t, b, g)
	if got := reps[g.Replicas[0].Name].Peers; len(got) != 2 {
		t.Errorf("rank 0 heard %v, want both other ranks", got)
	}

	other := gangOf(t, schemas.FrameworkCustom, f.probeRep(t, "worker", 0, probePlan{}))
	other.Workspace = "other"
	if a, o := reps[g.Replicas[0].Name].UID, f.report(t, b, other)[other.Replicas[0].Name].UID; a == o || o != DefaultFirstUID+1 {
		t.Errorf("workspaces test and other run as %d and %d, want %d and %d", a, o, DefaultFirstUID, DefaultFirstUID+1)
	}

	g2 := gangOf(t, schemas.FrameworkCustom,
		rep("worker", 0, "/bin/sh", "-c", `trap 'echo got SIGTERM; exit 0' TERM; echo up; while :; do sleep 0.05; done`),
		rep("worker", 1, "/bin/sh", "-c", `kill -KILL $$`))
	g2.Attempt = 3
	launchSandboxed(t, b, g2)
	firstLines(t, b, g2.GangRef, g2.Replicas[0].Name, 1)
	st := waitFor(t, b, g2.GangRef, "the second replica killed", func(r schemas.ReplicaStatus) bool {
		return r.Name == g2.Replicas[0].Name || r.Phase.Terminal()
	})
	if r := st.Replicas[1]; r.Phase != schemas.ReplicaFailed || r.Message != "killed by SIGKILL" {
		t.Errorf("a replica that killed itself: %s %q, want Failed, killed by SIGKILL", r.Phase, r.Message)
	}
	if err := b.Stop(context.Background(), g2.GangRef); err != nil {
		t.Fatal(err)
	}
	// sleep, in the same process group, is stopped too: the shell says Terminated.
	lines := logs(t, b, g2.GangRef, g2.Replicas[0].Name, 0)
	if len(lines) == 0 || lines[len(lines)-1].Line != "got SIGTERM" {
		t.Errorf("the stopped replica printed %v, want got SIGTERM last", lines)
	}
	if st, err := b.Observe(context.Background(), g2.GangRef); err != nil || st.Replicas[0].Phase != schemas.ReplicaStopped {
		t.Errorf("the stopped replica: %+v (%v), want Stopped", st, err)
	}
	if err := b.Cleanup(context.Background(), g2.GangRef); err != nil {
		t.Fatal(err)
	}
	if exists(b.gangDir(g2.ID())) {
		t.Errorf("Cleanup left %s", b.gangDir(g2.ID()))
	}
}

// TestSandboxRefusesHiddenWorkingDir: a job whose working directory lies in the stack's
// state directory, or below a directory other users may not pass, does not start.
func TestSandboxRefusesHiddenWorkingDir(t *testing.T) {
	f := newSandboxFixture(t)
	state := t.TempDir()
	b := newBackend(t, WithStateDir(state), WithBaseDir(f.wd), WithSandbox(Sandbox{}))
	private := filepath.Join(state, "..", "private")
	if err := os.MkdirAll(filepath.Join(private, "wd"), 0o700); err != nil {
		t.Fatal(err)
	}
	for i, wd := range []string{state, filepath.Join(private, "wd")} {
		r := rep("worker", 0, "/bin/true")
		r.WorkingDir = wd
		g := gangOf(t, schemas.FrameworkCustom, r)
		g.Attempt = i + 1
		launchSandboxed(t, b, g)
		st := waitFor(t, b, g.GangRef, "refused", terminal)
		if r := st.Replicas[0]; r.Phase != schemas.ReplicaFailed || !strings.HasPrefix(r.Message, "cannot start: working directory") {
			t.Errorf("working directory %s: %s %q, want Failed, cannot start", wd, r.Phase, r.Message)
		}
	}
}

// httpServer serves body on the host's loopback and returns its address.
func httpServer(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, body) })}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestSandboxNamespacesKeepWorkerThreads: making network namespaces and listening in
// them ends none of the worker's threads and leaves each in the worker's namespace. An
// ended thread kills the children it forked with a parent death signal: the stack's
// servers (internal/proc).
func TestSandboxNamespacesKeepWorkerThreads(t *testing.T) {
	newSandboxFixture(t)
	threads := func() map[string]string {
		out := map[string]string{}
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if ns, err := os.Readlink("/proc/self/task/" + e.Name() + "/ns/net"); err == nil {
				out[e.Name()] = ns
			}
		}
		return out
	}
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	before := threads()
	dir := t.TempDir()
	for i := range 20 {
		ns := filepath.Join(dir, strconv.Itoa(i))
		if err := newNetns(ns); err != nil {
			t.Fatal(err)
		}
		ln, err := listenIn(ns, "127.0.0.1:9")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if err := removeNetns(ns); err != nil {
			t.Fatal(err)
		}
	}
	after := threads()
	for tid := range before {
		if _, ok := after[tid]; !ok {
			t.Errorf("thread %s ended", tid)
		}
	}
	for tid, ns := range after {
		if ns != own {
			t.Errorf("thread %s is in %s, not the worker's %s", tid, ns, own)
		}
	}
}
