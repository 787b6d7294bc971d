package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// lockedBuffer is a bytes.Buffer the command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUpTemporalMutualTLS: `dlc up` with its defaults requires mutual TLS of Temporal's
// clients. Its banner names the CA and the client certificate it generated into the
// state directory (0600); the stack's own worker runs a job submitted through the API;
// with the banner's files (read as `dlc worker --temporal-tls-*` reads them) a client
// lists the job's workflow, while the SDK's client without TLS, and TLS without a
// client certificate, cannot list workflows.
func TestUpTemporalMutualTLS(t *testing.T) {
	ctx := itest.Context(t, 3*time.Minute)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	var out, errOut lockedBuffer
	up := newRoot()
	up.SetArgs([]string{"up", "--dir", state, "--addr", "127.0.0.1:0", "--workdir", dir, "--local-sandbox=false", "--trust-local-jobs"})
	up.SetOut(&out)
	up.SetErr(&errOut)
	upCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- up.ExecuteContext(upCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("dlc up: %v", err)
		}
	})
	timeout := time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	testutil.Eventually(t, timeout, "the banner of dlc up", func() error {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("dlc up exited: %v\n%s", err, errOut.String())
		default:
		}
		if !strings.Contains(out.String(), "Submit a job") {
			return fmt.Errorf("none yet:\n%s\n%s", out.String(), errOut.String())
		}
		return nil
	}, 100*time.Millisecond)
	t.Logf("dlc up ready in %s", time.Since(start).Round(time.Millisecond))
	banner := out.String()
	m := regexp.MustCompile(`Temporal     (\S+) \(namespace (\S+); mutual TLS: CA (\S+), client certificate (\S+) and key (\S+)\)`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("the banner does not name Temporal's mutual TLS files:\n%s", banner)
	}
	address, namespace := m[1], m[2]
	flags := &Config{Temporal: TemporalConfig{TLS: TemporalTLSConfig{CA: m[3], Cert: m[4], Key: m[5]}}}
	for _, f := range []string{flags.Temporal.TLS.CA, flags.Temporal.TLS.Cert, flags.Temporal.TLS.Key} {
		if !strings.HasPrefix(f, filepath.Join(state, "temporal", "tls")+"/") {
			t.Errorf("%s is not in the state directory's temporal/tls", f)
		}
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v; want mode 0600", f, err)
		}
	}

	// The stack's worker, API and dispatchers reach Temporal: a job runs.
	api1 := regexp.MustCompile(`API          (\S+)`).FindStringSubmatch(banner)
	token, err := os.ReadFile(filepath.Join(state, "admin-token"))
	if err != nil || api1 == nil {
		t.Fatalf("API %v, admin token: %v", api1, err)
	}
	c, err := dlc.New(api1[1], dlc.WithToken(strings.TrimSpace(string(token))))
	if err != nil {
		t.Fatal(err)
	}
	itest.Submit(t, ctx, c, itest.ShellJob(schemas.DefaultWorkspace, "over-tls", "echo over tls"))
	itest.WaitJob(t, ctx, c, schemas.DefaultWorkspace, "over-tls", "Succeeded", func(j *api.Job) bool { return j.Status.Phase == schemas.JobSucceeded })

	// With the banner's files: the job's workflow is listed.
	cfg, err := flags.temporalTLS()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: namespace, ConnectionOptions: client.ConnectionOptions{TLS: cfg}})
	if err != nil {
		t.Fatalf("dial with the banner's client certificate: %v", err)
	}
	defer tc.Close()
	resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: devstack.SearchAttrName + " = 'over-tls'"})
	if err != nil || len(resp.Executions) == 0 {
		t.Errorf("list the job's workflow with the client certificate: %v (%d executions)", err, len(resp.GetExecutions()))
	}

	// Without them: nothing.
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if plain, err := client.DialContext(dialCtx, client.Options{HostPort: address, Namespace: namespace}); err == nil {
		plain.Close()
		t.Error("the SDK's client without TLS connected to dlc up's Temporal")
	}
	noCert := cfg.Clone()
	noCert.Certificates = nil
	for name, creds := range map[string]credentials.TransportCredentials{"plaintext gRPC": insecure.NewCredentials(), "TLS without a client certificate": credentials.NewTLS(noCert)} {
		conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = workflowservice.NewWorkflowServiceClient(conn).ListWorkflowExecutions(callCtx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace})
		cancel()
		conn.Close()
		if err == nil {
			t.Errorf("%s listed dlc up's workflows", name)
		}
	}
}

// `dlc up --ui` needs --temporal-tls=false: the Web UI is the dev server's, which has no
// TLS. The refusal names both flags, before anything starts.
func TestUpUINeedsTemporalTLSOff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	c := newRoot()
	c.SetArgs([]string{"up", "--ui", "--dir", dir, "--addr", "127.0.0.1:0"})
	err := c.Execute()
	if err == nil || !strings.Contains(err.Error(), "--ui") || !strings.Contains(err.Error(), "--temporal-tls=false") {
		t.Fatalf("dlc up --ui: error %v, want one naming --ui and --temporal-tls=false", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("dlc up --ui made its state directory before refusing")
	}
	for flag, def := range map[string]string{"ui": "false", "temporal-tls": "true"} {
		if f := newUpCmd().Flags().Lookup(flag); f == nil || f.DefValue != def {
			t.Errorf("dlc up --%s: %+v, want default %s", flag, f, def)
		}
	}
}
