package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/backend/local"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// TestWorkerLocalSandbox: `dlc worker --local-sandbox`, the production topology's worker
// on the local backend, runs replicas in the sandbox that `dlc up` uses. On a stack of
// the test's own with no worker in it (so that only the test's worker polls its task
// queue), the hostile job of issue 33 (testdata/hostile_job.py) reads the worker's
// state directory and config file (which holds a secret in a comment, and lies in the
// job's own working directory, where only Sandbox.Hide keeps it out of sight), the
// environment of every process it sees (the worker's has its NATS password), and
// connects to Temporal and NATS. Through a plain `dlc worker` it prints the config
// file's secret and the NATS password and reaches both: the fault. Through `dlc worker
// --local-sandbox`, with the same config file, it prints neither, reads nothing, reaches
// neither and runs as its workspace's user, not root.
func TestWorkerLocalSandbox(t *testing.T) {
	if err := local.SandboxAvailable(); err != nil {
		t.Fatalf("the sandbox tests need root and bubblewrap (`task deps` installs it): %v", err)
	}
	t.Parallel()
	ctx := itest.Context(t, 5*time.Minute)
	dir := t.TempDir()
	wd := sandboxWorkDir(t)
	e := itest.StartStack(t, ctx, embedded.Config{Dir: filepath.Join(dir, "stack"), NoWorker: true, WorkDir: wd})
	c := itest.AdminClient(t, e)
	bin := dlcBinary(t)

	secret := fmt.Sprintf("worker-config-secret-%d", time.Now().UnixNano())
	cfgFile := filepath.Join(wd, "worker.yaml")
	if err := os.WriteFile(cfgFile, []byte("# "+secret+"\nlog: {verbose: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"the worker's config file":   secret,
		"the worker's NATS password": e.Stack.NATS.Password(devstack.NATSUserWorker),
	}
	nats, err := url.Parse(e.Stack.NATS.URL)
	if err != nil {
		t.Fatal(err)
	}
	targets := []string{e.Stack.Temporal.Address, nats.Host}

	// run starts a worker with extra, runs the hostile job through it and stops it.
	run := func(what, stateDir string, extra ...string) string {
		t.Helper()
		logPath := filepath.Join(dir, what+".log")
		args := append([]string{"--config", cfgFile, "--state-dir", stateDir, "--workdir", wd}, extra...)
		w, err := itest.StartWorker(bin, e, logPath, args...)
		if err != nil {
			t.Fatal(err)
		}
		proc := &workerProc{cmd: w}
		defer proc.kill()
		text := workerHostileJob(t, ctx, c, "worker-sandbox", wd, stateDir, cfgFile, targets, logPath)
		if proc.cmd.ProcessState != nil {
			t.Fatalf("%s worker exited: %v", what, proc.cmd.ProcessState)
		}
		return text
	}

	// The fault, without the sandbox.
	plain := run("plain", filepath.Join(dir, "plain"))
	t.Logf("dlc worker: %s", summary(plain))
	for what, s := range secrets {
		if !strings.Contains(plain, s) {
			t.Errorf("through a plain worker the hostile job did not print %s: the probe is broken, or the fault is gone", what)
		}
	}
	for _, target := range targets {
		if !strings.Contains(plain, "connect "+target+": ok") {
			t.Errorf("through a plain worker the hostile job did not reach %s", target)
		}
	}

	// In the sandbox: nothing.
	boxed := run("sandboxed", filepath.Join(dir, "boxed"), "--local-sandbox")
	t.Logf("dlc worker --local-sandbox: %s", summary(boxed))
	for what, s := range secrets {
		if strings.Contains(boxed, s) {
			t.Errorf("through dlc worker --local-sandbox the hostile job printed %s:\n%s", what, grepLines(boxed, s))
		}
	}
	for _, target := range targets {
		if !regexp.MustCompile(`connect ` + regexp.QuoteMeta(target) + `: error .*(refused|unreachable)`).MatchString(boxed) {
			t.Errorf("through dlc worker --local-sandbox, %s: %s", target, grepLines(boxed, "connect "+target))
		}
	}
	// A hidden file in a visible directory reads empty (/dev/null covers it); nothing reads more.
	if read := regexp.MustCompile(`(?m)^read .*: ok "[^"].*$`).FindAllString(boxed, -1); len(read) > 0 {
		t.Errorf("through dlc worker --local-sandbox the hostile job read:\n%s", strings.Join(read, "\n"))
	}
	if m := regexp.MustCompile(`(?m)^uid (\d+)$`).FindStringSubmatch(boxed); m == nil || m[1] == "0" {
		t.Errorf("through dlc worker --local-sandbox the job ran as %v, want its workspace's user", m)
	}
}

// workerHostileJob runs testdata/hostile_job.py, working in wd, in workspace ws against
// a worker's state directory and config file and the addresses targets, and returns
// what it printed; a job that fails fails the test with the worker's log.
func workerHostileJob(t *testing.T, ctx context.Context, c *dlc.Client, ws, wd, stateDir, cfgFile string, targets []string, workerLog string) string {
	t.Helper()
	text, j := runHostileJob(t, ctx, c, ws, wd, append([]string{stateDir, cfgFile, "--"}, targets...)...)
	if j.Status.Phase != schemas.JobSucceeded {
		log, _ := os.ReadFile(workerLog)
		t.Fatalf("the hostile job: %s %s\n%s\nworker log:\n%s", j.Status.Phase, j.Status.Message, text, log)
	}
	return text
}
