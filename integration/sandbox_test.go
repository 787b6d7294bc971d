package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/backend/local"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// TestLocalSandbox runs a stack as `dlc up` runs one as root (the local backend's
// sandbox, with StorageIsolation), and on it:
//   - the hostile job of issue 33 (testdata/hostile_job.py), a member's job that reads
//     the state directory, the admin token and the NATS passwords, reads the environment
//     and command line of every process it sees, and connects to Temporal, NATS and the
//     API. On the shared stack, whose replicas run without the sandbox, it prints the
//     admin token and the NATS passwords and connects to all three: the fault. In the
//     sandbox it prints none of the stack's secrets, connects to none of them, sees no
//     process but its own, and runs as its workspace's user, not root;
//   - the example trainer, two data-parallel replicas with checkpoints, whose first
//     attempt fails at epoch 3: the second resumes from the checkpoint in S3 and the
//     job succeeds, all inside the sandbox.
func TestLocalSandbox(t *testing.T) {
	if err := local.SandboxAvailable(); err != nil {
		t.Fatalf("the sandbox tests need root and bubblewrap (`task deps` installs it): %v", err)
	}
	t.Parallel()
	ctx := itest.Context(t, 6*time.Minute)
	wd := sandboxWorkDir(t)
	e := itest.StartStack(t, ctx, embedded.Config{WorkDir: wd, StorageIsolation: true, Sandbox: true})
	c := itest.AdminClient(t, e)
	if !e.Sandboxed() {
		t.Fatal("the stack's local backend is not sandboxed")
	}

	// The fault, without the sandbox: the same job on the shared stack.
	const ws = "sandbox-hostile"
	plain := hostileJob(t, ctx, env.e, env.api, ws, wd)
	t.Logf("without the sandbox: %s", summary(plain.text))
	for what, secret := range stackSecrets(t, env.e) {
		if what == "the S3 gateway's root secret key" {
			continue // the shared stack's replicas are given it
		}
		if !strings.Contains(plain.text, secret) {
			t.Errorf("without the sandbox the hostile job did not print %s: the probe is broken, or the fault is gone", what)
		}
	}
	for _, target := range plain.targets {
		if !strings.Contains(plain.text, "connect "+target+": ok") {
			t.Errorf("without the sandbox the hostile job did not reach %s", target)
		}
	}

	// In the sandbox: nothing.
	boxed := hostileJob(t, ctx, e, c, ws, wd)
	t.Logf("in the sandbox: %s", summary(boxed.text))
	for what, secret := range stackSecrets(t, e) {
		if strings.Contains(boxed.text, secret) {
			t.Errorf("in the sandbox the hostile job printed %s", what)
		}
	}
	for _, target := range boxed.targets {
		if !regexp.MustCompile(`connect ` + regexp.QuoteMeta(target) + `: error .*(refused|unreachable)`).MatchString(boxed.text) {
			t.Errorf("in the sandbox, %s: %s", target, grepLines(boxed.text, "connect "+target))
		}
	}
	if m := regexp.MustCompile(`(?m)^uid (\d+)$`).FindStringSubmatch(boxed.text); m == nil || m[1] == "0" {
		t.Errorf("in the sandbox the job ran as %v, want its workspace's user", m)
	}
	if strings.Contains(boxed.text, ": ok ") {
		t.Errorf("in the sandbox the hostile job read:\n%s", grepLines(boxed.text, ": ok "))
	}
	if pids := regexp.MustCompile(`(?m)^proc (\d+) cmdline`).FindAllStringSubmatch(boxed.text, -1); len(pids) > 2 {
		t.Errorf("in the sandbox the job sees %d processes: %v", len(pids), pids) // bwrap's pid 1 and itself
	}

	// Training with checkpoints, a failure and a resume, in the sandbox.
	const trainWS = "sandbox-train"
	uri := "s3://dlc/workspaces/" + trainWS + "/ckpt"
	itest.Submit(t, ctx, c, itest.JobDoc("train", trainWS, fmt.Sprintf(`
  framework: pytorch
  command: [./trainer, --epochs, "5", --lr, "0.2", --fail-at-epoch, "3", --fail-attempt, "0"]
  roles: {worker: {replicas: 2}}
  checkpoint: {uri: %s, keep: 2}
  faultTolerance: {maxRestarts: 1}
  timeout: 4m
`, uri)))
	j := itest.WaitJob(t, ctx, c, trainWS, "train", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	var recs []events.LogRecord
	if err := c.Logs(ctx, trainWS, "train", dlc.LogOptions{}, func(r events.LogRecord) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var lines []string
	resumed := ""
	for _, r := range recs {
		lines = append(lines, fmt.Sprintf("a%d %s-%d: %s", r.Attempt, r.Role, r.Index, r.Line))
		if r.Attempt == 1 && strings.HasPrefix(r.Line, "resumed from "+uri+"/") {
			resumed = r.Line
		}
	}
	t.Logf("the trainer in the sandbox: %s after %d attempts, %q, last checkpoint %s", j.Status.Phase, len(j.Status.Attempts), resumed, j.Status.LastCheckpoint)
	if j.Status.Phase != schemas.JobSucceeded || resumed == "" || !strings.HasPrefix(j.Status.LastCheckpoint, uri+"/") {
		t.Errorf("the trainer in the sandbox: %s (%s), last checkpoint %q, resumed %q; logs:\n%s",
			j.Status.Phase, j.Status.Message, j.Status.LastCheckpoint, resumed, strings.Join(lines, "\n"))
	}
}

// sandboxWorkDir is a working directory for sandboxed replicas: any user may pass
// through it and its parent (t.TempDir's are 0700), and it holds the example trainer
// and the hostile job.
func sandboxWorkDir(t *testing.T) string {
	t.Helper()
	wd := t.TempDir()
	for _, d := range []string{wd, filepath.Dir(wd)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for src, mode := range map[string]os.FileMode{env.trainer: 0o755, filepath.Join(itest.Root(), "integration", "testdata", "hostile_job.py"): 0o644} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wd, filepath.Base(src)), data, mode); err != nil {
			t.Fatal(err)
		}
	}
	return wd
}

// hostile is what the hostile job printed, and the addresses it tried.
type hostile struct {
	text    string
	targets []string // Temporal, NATS, the API
}

// hostileJob runs testdata/hostile_job.py on stack e in workspace ws, working in wd,
// against e's state directory, admin token and NATS passwords, Temporal, NATS and API.
func hostileJob(t *testing.T, ctx context.Context, e *embedded.Embedded, c *dlc.Client, ws, wd string) hostile {
	t.Helper()
	nats, err := url.Parse(e.Stack.NATS.URL)
	if err != nil {
		t.Fatal(err)
	}
	apiURL, err := url.Parse(e.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	h := hostile{targets: []string{e.Stack.Temporal.Address, nats.Host, apiURL.Host}}
	var j *api.Job
	h.text, j = runHostileJob(t, ctx, c, ws, wd, append([]string{e.Dir, e.AdminTokenFile,
		filepath.Join(e.Dir, "nats", devstack.NATSUsersFile), "--"}, h.targets...)...)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("the hostile job: %s %s\n%s", j.Status.Phase, j.Status.Message, h.text)
	}
	return h
}

// runHostileJob runs testdata/hostile_job.py with args, working in wd, in workspace ws,
// waits for its end and returns what it printed and the job as it ended.
func runHostileJob(t *testing.T, ctx context.Context, c *dlc.Client, ws, wd string, args ...string) (string, *api.Job) {
	t.Helper()
	argvJSON, err := json.Marshal(append([]string{"/usr/bin/python3", "hostile_job.py"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("hostile-%d", time.Now().UnixNano()%1e6)
	itest.Submit(t, ctx, c, itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  command: %s
  workingDir: %s
  roles: {worker: {replicas: 1}}
`, argvJSON, wd)))
	j := itest.WaitJob(t, ctx, c, ws, name, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	var b strings.Builder
	for _, r := range itest.JobLogs(t, ctx, c, ws, name) {
		b.WriteString(r.Line + "\n")
	}
	return b.String(), j
}

// stackSecrets are the secrets of stack e that no member's job may learn, by what
// they are.
func stackSecrets(t *testing.T, e *embedded.Embedded) map[string]string {
	t.Helper()
	return map[string]string{
		"the admin token":                  e.AdminToken,
		"the worker's NATS password":       e.Stack.NATS.Password(devstack.NATSUserWorker),
		"the server's NATS password":       e.Stack.NATS.Password(devstack.NATSUserServer),
		"the S3 gateway's root secret key": e.Stack.S3.SecretKey,
	}
}

// summary is the first words of each kind of line of the hostile job's output.
func summary(text string) string {
	counts := map[string]int{}
	var ok []string
	for l := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		kind, _, _ := strings.Cut(l, " ")
		counts[kind]++
		if strings.Contains(l, ": ok") {
			ok = append(ok, l[:min(len(l), 80)])
		}
	}
	return fmt.Sprintf("%v; succeeded: %d lines, e.g. %v", counts, len(ok), ok[:min(len(ok), 3)])
}

// grepLines are the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDlcUpSingleTenantWithoutSandbox: `dlc up` without the sandbox says its local jobs
// are not sandboxed and the stack single-tenant, and gives tokens to admins and the
// default workspace only: a member or viewer token of another workspace is refused,
// saying why.
func TestDlcUpSingleTenantWithoutSandbox(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := dlcBinary(t)
	addr := freeAddr(t)
	up := itest.StartDlcUp(t, ctx, bin, "--dir", filepath.Join(dir, "state"), "--addr", addr, "--ui=false", "--workdir", dir, "--local-sandbox=false")
	if want := "Local jobs   NOT sandboxed (--local-sandbox=false): single-tenant"; !strings.Contains(up.Banner, want) {
		t.Errorf("banner lacks %q:\n%s", want, up.Banner)
	}
	token, err := os.ReadFile(filepath.Join(dir, "state", "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	run := itest.CLI{Bin: bin, Server: "http://" + addr, Token: strings.TrimSpace(string(token))}.Runner(ctx)
	if out, err := run("workspace", "create", "other"); err != nil {
		t.Fatalf("workspace create: %v\n%s", err, out)
	}
	for _, role := range []string{"member", "viewer"} {
		out, err := run("-w", "other", "token", "create", "other-"+role, "--role", role)
		if err == nil || !strings.Contains(out, "single-tenant: local jobs run without the sandbox (--local-sandbox=false)") {
			t.Errorf("a %s token of another workspace: %v\n%s", role, err, out)
		}
	}
	if out, err := run("-w", schemas.DefaultWorkspace, "token", "create", "default-member", "--role", "member"); err != nil {
		t.Errorf("a member token of the default workspace: %v\n%s", err, out)
	}
}
