package devstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/opendlc/opendlc/internal/testcert"
	"github.com/opendlc/opendlc/internal/testutil"
)

// TestTemporalTLSRefusesClientsWithoutTheCertificate: a dev server's state directory
// with a running workflow is opened with TLS (the Temporal server on the same SQLite
// file): the workflow is kept, a worker with the client certificate runs a workflow to
// completion, and a client without it cannot list workflows: plaintext gRPC, TLS
// without a client certificate, and a client certificate of another CA. Opened by the
// dev server again, the database keeps the workflows of both.
func TestTemporalTLSRefusesClientsWithoutTheCertificate(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 4*time.Minute)
	dir := t.TempDir()
	plain := TemporalOptions{Dir: dir, Namespace: "tls-test"}
	srv, c := startTestTemporal(t, ctx, plain)
	if srv.TLS != nil || srv.TLSConfig() != nil {
		t.Errorf("the dev server without TLS has TLS files %+v", srv.TLS)
	}
	kept, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "made-by-dev-server", TaskQueue: "nobody-polls",
		TypedSearchAttributes: temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword(SearchAttrWorkspace).ValueSet("vision")),
	}, "NoSuchWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	// The Web UI is the dev server's: refused with TLS, naming the option, before a start.
	if _, err := StartTemporal(ctx, TemporalOptions{Dir: dir, Namespace: "tls-test", TLS: true, UI: true}); err == nil || !strings.Contains(err.Error(), "TemporalOptions.UI") {
		t.Errorf("TLS with UI: error %v, want one naming TemporalOptions.UI", err)
	}
	start := time.Now()
	srv, err = StartTemporal(ctx, TemporalOptions{Dir: dir, Namespace: "tls-test", TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("temporal with TLS ready at %s in %s", srv.Address, time.Since(start).Round(time.Millisecond))
	defer srv.Close()
	checkTemporalTLSFiles(t, srv.TLS)
	checkTemporalTLS(t, srv.Address, srv.Namespace, srv.TLSConfig())
	checkInternodeTLS(t, srv.ports, srv.TLSConfig())

	tc := dialTLS(t, srv.Address, srv.Namespace, srv.TLSConfig())
	desc, err := tc.DescribeWorkflowExecution(ctx, kept.GetID(), kept.GetRunID())
	if err != nil {
		t.Fatalf("the dev server's workflow under the server with TLS: %v", err)
	}
	if got := desc.WorkflowExecutionInfo.Status; got != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("the dev server's workflow is %v, want running", got)
	}
	testutil.Eventually(t, 30*time.Second, "the dev server's workflow visible by search attribute", func() error {
		return listed(ctx, tc, srv.Namespace, SearchAttrWorkspace+" = 'vision'", kept.GetID())
	})
	done := runEcho(t, tc, "made-with-tls")
	tc.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	// Back on the dev server (no TLS): both workflows are there.
	srv, c = startTestTemporal(t, ctx, plain)
	defer srv.Close()
	defer c.Close()
	for id, want := range map[string]enumspb.WorkflowExecutionStatus{
		kept.GetID(): enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, done: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
	} {
		desc, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatalf("workflow %s back on the dev server: %v", id, err)
		}
		if got := desc.WorkflowExecutionInfo.Status; got != want {
			t.Errorf("workflow %s back on the dev server is %v, want %v", id, got, want)
		}
	}
}

// TestTemporalServerOnPostgresTLS: the server on PostgreSQL with TLS refuses clients
// without the client certificate, and runs a workflow for one with it.
func TestTemporalServerOnPostgresTLS(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 4*time.Minute)
	dir := postgresTestDir(t)
	s, err := Start(ctx, Options{Dir: dir, TemporalOnPostgres: true, TemporalTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.TemporalServer.TLS == nil || s.Temporal.TLS == nil || *s.Temporal.TLS != *s.TemporalServer.TLS {
		t.Fatalf("Stack.Temporal.TLS %+v, TemporalServer.TLS %+v: want the server's files in both", s.Temporal.TLS, s.TemporalServer.TLS)
	}
	checkTemporalTLSFiles(t, s.Temporal.TLS)
	checkTemporalTLS(t, s.Temporal.Address, s.Temporal.Namespace, s.Temporal.TLSConfig())
	checkInternodeTLS(t, s.TemporalServer.ports, s.Temporal.TLSConfig())
	tc := dialTLS(t, s.Temporal.Address, s.Temporal.Namespace, s.Temporal.TLSConfig())
	defer tc.Close()
	runEcho(t, tc, "on-postgres-with-tls")
}

// checkTemporalTLSFiles checks that the client's files exist, are private, and are
// what the server trusts: the server's certificate verifies against the same CA.
func checkTemporalTLSFiles(t *testing.T, f *TemporalTLSFiles) {
	t.Helper()
	if f == nil {
		t.Fatal("no TLS files")
	}
	dir := filepath.Dir(f.CAFile)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, %v; want mode 0700", dir, fi.Mode(), err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s/%s is %v, want 0600", dir, e.Name(), fi.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ca-key.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the CA's key is kept (%v)", err)
	}
}

// checkTemporalTLS checks that clients without the client certificate cannot list
// workflows at address, and one with it can. Each refused client is a single gRPC call
// without the SDK's retries.
func checkTemporalTLS(t *testing.T, address, namespace string, good *tls.Config) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	list := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = workflowservice.NewWorkflowServiceClient(conn).ListWorkflowExecutions(callCtx,
			&workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 10})
		return err
	}
	// The client with the certificate lists: what the refusals below are measured against.
	if err := list(credentials.NewTLS(good)); err != nil {
		t.Fatalf("list workflows with the client certificate: %v", err)
	}
	noCert := good.Clone()
	noCert.Certificates = nil
	other := good.Clone()
	certFile, keyFile := testcert.Write(t, t.TempDir(), "opendlc-dev Temporal client")
	otherCert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// Presented whatever CAs the server asks for (a client picking from Certificates
	// would send none).
	other.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &otherCert, nil }
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext gRPC":                     insecure.NewCredentials(),
		"TLS without a client certificate":   credentials.NewTLS(noCert),
		"a client certificate of another CA": credentials.NewTLS(other),
	} {
		if err := list(creds); err == nil {
			t.Errorf("%s listed the workflows", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// And the SDK's client, as OpenDLC's processes dial, without TLS.
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if c, err := client.DialContext(dialCtx, client.Options{HostPort: address, Namespace: namespace}); err == nil {
		c.Close()
		t.Error("the SDK's client without TLS connected")
	}
	// The client's certificate verifies against the CA it came with, so the refusal of
	// another CA's is the server's doing.
	leaf, err := x509.ParseCertificate(good.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: good.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client certificate does not verify against the installation's CA: %v", err)
	}
}

// checkInternodeTLS checks that the server's own services (history and matching: their
// gRPC ports take any request of the frontend's without a check of their own) answer a
// health check only over TLS with a certificate of the installation's CA. (The worker
// service serves no gRPC; every service's membership port speaks ringpop's protocol,
// without TLS: docs/security.md.)
func checkInternodeTLS(t *testing.T, ports temporalServerPorts, good *tls.Config) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	check := func(port int, creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(callCtx, &healthpb.HealthCheckRequest{})
		if status.Code(err) == codes.NotFound || status.Code(err) == codes.Unimplemented {
			return nil // the service answered, if not about this name
		}
		return err
	}
	noCert := good.Clone()
	noCert.Certificates = nil
	noCert.ServerName = temporalServerName
	withCert := good.Clone()
	withCert.ServerName = temporalServerName
	// The frontend's HTTP API (the gRPC API as JSON) is behind the same TLS.
	get := func(cfg *tls.Config) error {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/api/v1/namespaces", ports.FrontendHTTP))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	if err := get(withCert); err != nil {
		t.Errorf("frontend HTTP API with the client certificate: %v", err)
	}
	if err := get(noCert); err == nil {
		t.Error("the frontend's HTTP API answered TLS without a client certificate")
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	if resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces", ports.FrontendHTTP)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the frontend's HTTP API answered plain HTTP")
		}
	}
	for name, port := range map[string]int{"history": ports.History, "matching": ports.Matching} {
		if port == 0 {
			t.Fatalf("no port of %s", name)
		}
		if err := check(port, credentials.NewTLS(withCert)); err != nil {
			t.Errorf("%s: health check with the installation's certificate: %v", name, err)
		}
		if err := check(port, insecure.NewCredentials()); err == nil {
			t.Errorf("%s answered plaintext gRPC", name)
		}
		if err := check(port, credentials.NewTLS(noCert)); err == nil {
			t.Errorf("%s answered TLS without a client certificate", name)
		}
	}
}

func dialTLS(t *testing.T, address, namespace string, cfg *tls.Config) client.Client {
	t.Helper()
	c, err := client.DialContext(testContext(t, time.Minute), client.Options{
		HostPort: address, Namespace: namespace, ConnectionOptions: client.ConnectionOptions{TLS: cfg},
	})
	if err != nil {
		t.Fatalf("dial with the client certificate: %v", err)
	}
	return c
}

func echo(_ workflow.Context, s string) (string, error) { return s, nil }

// runEcho runs a workflow with a worker over c's connection and returns its id.
func runEcho(t *testing.T, c client.Client, id string) string {
	t.Helper()
	ctx := testContext(t, time.Minute)
	w := worker.New(c, "tls-echo", worker.Options{})
	w.RegisterWorkflow(echo)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "tls-echo"}, echo, id)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != id {
		t.Fatalf("workflow over TLS: %q, %v", got, err)
	}
	return id
}

func listed(ctx context.Context, c client.Client, namespace, query, id string) error {
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: query})
	if err != nil {
		return err
	}
	for _, e := range resp.Executions {
		if e.Execution.WorkflowId == id {
			return nil
		}
	}
	return fmt.Errorf("%s not among %d executions", id, len(resp.Executions))
}
