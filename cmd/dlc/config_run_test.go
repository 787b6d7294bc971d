package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// `dlc server --config FILE` and `dlc worker --config FILE` read their connections from
// one file (Temporal over mutual TLS, NATS) with no connection flag: a job submitted
// through that server runs on that worker.
func TestServerAndWorkerFromOneConfigFile(t *testing.T) {
	ctx := itest.Context(t, 3*time.Minute)
	stack := itest.StartStack(t, ctx, embedded.Config{NoWorker: true, TemporalTLS: true})
	s := stack.Stack
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	file := filepath.Join(dir, "dlc.yaml")
	config := fmt.Sprintf(`
temporal:
  address: %q
  namespace: %q
  tls: {cert: %q, key: %q, ca: %q}
nats:
  url: %q
api:
  addr: 127.0.0.1:0
  adminTokenFile: %q
worker:
  local: {stateDir: %q, workDir: %q}
`, s.Temporal.Address, s.Temporal.Namespace, s.Temporal.TLS.CertFile, s.Temporal.TLS.KeyFile, s.Temporal.TLS.CAFile,
		s.NATS.URL, tokenFile, filepath.Join(dir, "local"), dir)
	if s.NATS.CAFile != "" {
		config += fmt.Sprintf("  tls: {ca: %q}\n", s.NATS.CAFile)
	}
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// The variables the chart sets; secrets never come from the file. Each command reads
	// them when it starts, so the server starts with its NATS user and the worker with
	// its own.
	for _, v := range stack.ReplicaEnv() {
		t.Setenv(v.Name, v.Value)
	}
	for _, name := range []string{"DLC_TEMPORAL_ADDRESS", "DLC_NATS_URL", "DLC_NATS_CA"} {
		t.Setenv(name, "")
	}
	start := func(user string, args ...string) *lockedBuffer {
		t.Setenv("DLC_NATS_USER", user)
		t.Setenv("DLC_NATS_PASSWORD", s.NATS.Password(user))
		var out lockedBuffer
		cmd := newRoot()
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(runCtx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("dlc %s: %v\n%s", args[0], err, out.String())
			}
		})
		return &out
	}
	serverOut := start(devstack.NATSUserServer, "server", "--config", file)
	var apiURL string
	testutil.Eventually(t, itest.Left(ctx), "dlc server --config to listen", func() error {
		m := regexp.MustCompile(`API listening on (\S+)`).FindStringSubmatch(serverOut.String())
		if m == nil {
			return fmt.Errorf("output so far: %q", serverOut.String())
		}
		apiURL = m[1]
		return nil
	})
	workerOut := start(devstack.NATSUserWorker, "worker", "--config", file)
	testutil.Eventually(t, itest.Left(ctx), "dlc worker --config to start", func() error {
		if !strings.Contains(workerOut.String(), "worker started (local backend)") {
			return fmt.Errorf("output so far: %q", workerOut.String())
		}
		return nil
	})
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlc.New(apiURL, dlc.WithToken(strings.TrimSpace(string(token))))
	if err != nil {
		t.Fatal(err)
	}
	itest.Submit(t, ctx, c, itest.ShellJob(schemas.DefaultWorkspace, "from-config", "echo from config"))
	itest.WaitJob(t, ctx, c, schemas.DefaultWorkspace, "from-config", "Succeeded", func(j *api.Job) bool { return j.Status.Phase == schemas.JobSucceeded })
}
