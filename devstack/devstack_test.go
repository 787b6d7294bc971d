package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func testContext(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func startTestTemporal(t *testing.T, ctx context.Context, opts TemporalOptions) (*Temporal, client.Client) {
	t.Helper()
	start := time.Now()
	srv, err := StartTemporal(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("temporal ready at %s in %s", srv.Address, time.Since(start).Round(time.Millisecond))
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address, Namespace: srv.Namespace})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	return srv, c
}

func TestTemporalRestartKeepsState(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	dir := t.TempDir()
	opts := TemporalOptions{Dir: dir, UI: true, Namespace: "devstack-test"}
	srv, c := startTestTemporal(t, ctx, opts)
	if srv.UIAddress == "" || srv.Namespace != "devstack-test" {
		t.Errorf("got %+v, want a UI address and namespace devstack-test", srv)
	}

	// The custom search attributes are registered in the namespace.
	sas, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: srv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range SearchAttributes {
		if got := sas.GetCustomAttributes()[name]; got != typ {
			t.Errorf("search attribute %s: got %v, want %v", name, got, typ)
		}
	}

	// A workflow nobody polls for stays running: it is the state to keep.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "devstack-wf",
		TaskQueue: "devstack-tq",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(SearchAttrWorkspace).ValueSet("vision"),
			temporal.NewSearchAttributeKeyKeyword(SearchAttrKind).ValueSet("TrainingJob"),
		),
	}, "NoSuchWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	listByWorkspace := func(c client.Client) error {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: srv.Namespace,
			Query:     fmt.Sprintf("%s = 'vision' AND %s = 'TrainingJob'", SearchAttrWorkspace, SearchAttrKind),
		})
		if err != nil {
			return err
		}
		if len(resp.Executions) != 1 || resp.Executions[0].Execution.WorkflowId != "devstack-wf" {
			return fmt.Errorf("visibility query returned %d executions", len(resp.Executions))
		}
		return nil
	}
	testutil.Eventually(t, 10*time.Second, "workflow visible by search attribute", func() error { return listByWorkspace(c) })
	c.Close()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	srv, c = startTestTemporal(t, ctx, opts)
	defer func() {
		c.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	desc, err := c.DescribeWorkflowExecution(ctx, "devstack-wf", run.GetRunID())
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if got := desc.WorkflowExecutionInfo.Status; got != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("after restart the workflow is %v, want running", got)
	}
	testutil.Eventually(t, 10*time.Second, "workflow visible by search attribute after restart", func() error { return listByWorkspace(c) })
}

func TestNATSRestartKeepsStream(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, time.Minute)
	dir := t.TempDir()
	// start starts the server on dir and connects to it; the caller closes both.
	start := func() (*NATS, *nats.Conn, jetstream.JetStream) {
		n, err := StartNATS(ctx, NATSOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(n.URL)
		if err != nil {
			_ = n.Close()
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			_ = n.Close()
			t.Fatal(err)
		}
		return n, nc, js
	}
	publish := func() {
		n, nc, js := start()
		defer n.Close()
		defer nc.Close()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b", "a"} { // the second "a" is a duplicate
			if _, err := js.Publish(ctx, "events.job", []byte("event "+id), jetstream.WithMsgID(id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	publish()

	n, nc, js := start()
	defer n.Close()
	defer nc.Close()
	stream, err := js.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("after restart the stream holds %d messages, want 2", info.State.Msgs)
	}
	msg, err := stream.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "event b" {
		t.Errorf("message 2 = %q, want %q", msg.Data, "event b")
	}
}

// s3Event is the part of the AWS event notification JSON the test reads.
type s3Event struct {
	Records []struct {
		EventName string `json:"eventName"`
		S3        struct {
			Bucket struct {
				Name string `json:"name"`
			} `json:"bucket"`
			Object struct {
				Key  string `json:"key"`
				Size int64  `json:"size"`
			} `json:"object"`
		} `json:"s3"`
	} `json:"Records"`
}

func TestS3ObjectsBucketsAndEvents(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	dir := t.TempDir()
	n, err := StartNATS(ctx, NATSOptions{Dir: dir + "/nats"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 64)
	if _, err := nc.ChanSubscribe(DefaultEventSubject, msgs); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	opts := S3Options{Dir: dir + "/s3", NATSURL: n.URL, Buckets: []string{"datasets", "ckpt"}}
	start := time.Now()
	srv, err := StartS3(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("s3 ready at %s in %s", srv.Endpoint, time.Since(start).Round(time.Millisecond))
	defer srv.Close()
	c := srv.Client()

	body := []byte(`{"clicks": 42}`)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String("datasets"), Key: aws.String("clicks/2026-11-30/part-0001.json"), Body: bytes.NewReader(body),
	}); err != nil {
		t.Fatal(err)
	}
	getObject := func(c *s3.Client) []byte {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("datasets"), Key: aws.String("clicks/2026-11-30/part-0001.json")})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		got, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := getObject(c); !bytes.Equal(got, body) {
		t.Errorf("GetObject = %q, want %q", got, body)
	}

	// The PutObject is announced on NATS. The gateway also sends an
	// s3:TestEvent when it connects; skip anything but ours.
	deadline := time.After(10 * time.Second)
	for found := false; !found; {
		select {
		case m := <-msgs:
			var ev s3Event
			if json.Unmarshal(m.Data, &ev) != nil || len(ev.Records) != 1 {
				continue
			}
			r := ev.Records[0]
			found = r.EventName == "s3:ObjectCreated:Put" && r.S3.Bucket.Name == "datasets" &&
				r.S3.Object.Key == "clicks/2026-11-30/part-0001.json" && r.S3.Object.Size == int64(len(body))
		case <-deadline:
			t.Fatal("no s3:ObjectCreated:Put event on " + DefaultEventSubject + " within 10s")
		}
	}

	// Creating buckets again, by hand or by a restart on the same Dir, is fine
	// and keeps their objects.
	if err := srv.CreateBuckets(ctx, "datasets", "ckpt", "models"); err != nil {
		t.Fatalf("CreateBuckets again: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err = StartS3(ctx, opts)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer srv.Close()
	c = srv.Client()
	if got := getObject(c); !bytes.Equal(got, body) {
		t.Errorf("after restart GetObject = %q, want %q", got, body)
	}
	out, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	slices.Sort(names)
	if want := []string{"ckpt", "datasets", "models"}; !slices.Equal(names, want) {
		t.Errorf("buckets = %v, want %v", names, want)
	}
}

func TestStartStack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 3*time.Minute)
	start := time.Now()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Buckets: []string{"artifacts"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stack ready in %s", time.Since(start).Round(time.Millisecond))
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	for name, addr := range map[string]string{"temporal": s.Temporal.Address, "nats": s.NATS.URL, "s3": s.S3.Endpoint} {
		if !strings.Contains(addr, "127.0.0.1:") {
			t.Errorf("%s listens on %q, want loopback", name, addr)
		}
	}
	if s.Temporal.UIAddress != "" {
		t.Errorf("UI address %q without Options.UI", s.Temporal.UIAddress)
	}
	if s.S3.EventSubject != DefaultEventSubject {
		t.Errorf("S3 events go to %q, want %q", s.S3.EventSubject, DefaultEventSubject)
	}
	if _, err := s.S3.Client().HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("artifacts")}); err != nil {
		t.Errorf("bucket artifacts: %v", err)
	}

	// A namespace of one's own, with the search attributes, usable at once.
	start = time.Now()
	for range 2 { // the second call finds it there
		if err := s.Temporal.CreateNamespace(ctx, "team-a"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("namespace ready in %s", time.Since(start).Round(time.Millisecond))
	c, err := client.DialContext(ctx, client.Options{HostPort: s.Temporal.Address, Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "in-team-a",
		TaskQueue: "devstack-tq",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(SearchAttrOwner).ValueSet("alice"),
		),
	}, "NoSuchWorkflow"); err != nil {
		t.Fatal(err)
	}
}

// TestStartFailures checks that a component that cannot start returns an
// error quoting its log, instead of hanging or taking the caller down.
func TestStartFailures(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, time.Minute)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port

	if _, err := StartNATS(ctx, NATSOptions{Dir: t.TempDir(), Port: port}); err == nil {
		t.Error("StartNATS on a taken port succeeded")
	}
	if _, err := StartTemporal(ctx, TemporalOptions{Dir: t.TempDir(), Port: port}); err == nil || !strings.Contains(err.Error(), "temporal exited") {
		t.Errorf("StartTemporal on a taken port: got %v, want the exit and its log", err)
	}
	if _, err := StartS3(ctx, S3Options{Dir: t.TempDir() + "/s3", NATSURL: "nats://127.0.0.1:" + strconv.Itoa(port)}); err == nil || !strings.Contains(err.Error(), "versitygw exited") {
		t.Errorf("StartS3 with an unreachable NATS: got %v, want the exit and its log", err)
	}
}

// With TemporalOnPostgres the stack runs the Temporal server on PostgreSQL instead of the
// dev server: Stack.Temporal is its address and namespace, the namespace has the search
// attributes and answers visibility queries by them, and Close stops the server and
// PostgreSQL.
func TestStartStackTemporalOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 4*time.Minute)
	dir := postgresTestDir(t)
	s, err := Start(ctx, Options{Dir: dir, TemporalOnPostgres: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()
	if s.TemporalServer == nil || s.Postgres == nil {
		t.Fatalf("TemporalServer %v, Postgres %v: want both", s.TemporalServer, s.Postgres)
	}
	if s.Temporal.Address != s.TemporalServer.Address || s.Temporal.Namespace != DefaultNamespace {
		t.Errorf("Stack.Temporal is %s/%s, want the server's %s/%s", s.Temporal.Address, s.Temporal.Namespace, s.TemporalServer.Address, DefaultNamespace)
	}
	if _, err := os.Stat(filepath.Join(dir, "temporal")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dev server's directory exists (%v): the dev server ran", err)
	}

	c, err := client.DialContext(ctx, client.Options{HostPort: s.Temporal.Address, Namespace: s.Temporal.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "on-postgres",
		TaskQueue: "devstack-tq",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(SearchAttrWorkspace).ValueSet("vision"),
		),
	}, "NoSuchWorkflow"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "workflow visible by search attribute", func() error {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.Temporal.Namespace, Query: SearchAttrWorkspace + " = 'vision'",
		})
		if err != nil {
			return err
		}
		if len(resp.Executions) != 1 || resp.Executions[0].Execution.WorkflowId != "on-postgres" {
			return fmt.Errorf("visibility query returned %d executions", len(resp.Executions))
		}
		return nil
	})

	// The server answers 40 visibility queries sent at once, none refused for the
	// namespace's visibility rate (10 a second by default, 100 as configured: each API
	// listing is one). A client of its own, without the SDK's retries, which would hide
	// a refusal.
	conn, err := grpc.NewClient(s.Temporal.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := workflowservice.NewWorkflowServiceClient(conn)
	errs := make([]error, 40)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = raw.ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: s.Temporal.Namespace, Query: SearchAttrWorkspace + " = 'vision'",
			})
		})
	}
	wg.Wait()
	refused := 0
	for _, err := range errs {
		if status.Code(err) == codes.ResourceExhausted {
			refused++
		} else if err != nil {
			t.Errorf("visibility query: %v", err)
		}
	}
	if refused > 0 {
		t.Errorf("%d of %d visibility queries sent at once refused for the rate limit", refused, len(errs))
	}

	closed = true
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, addr := range map[string]string{"temporal server": s.TemporalServer.Address, "postgres": s.Postgres.Address()} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still listens on %s after Close", name, addr)
		}
	}
}
