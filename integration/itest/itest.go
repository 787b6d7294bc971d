// Package itest holds what the integration tests of package integration and of
// integration/kube share: running a package's tests around one stack (Main), starting a
// test's own stack (StartStack), building the repository's commands (Build), the
// arguments and environment of a `dlc worker` process against a stack, API clients,
// and polling a job until a condition holds.
package itest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/checkpoint"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/internal/gobuild"
	"github.com/opendlc/opendlc/internal/testutil"
)

// Main runs a package's tests: it makes a temporary directory (removed afterwards),
// calls setup with it and a context bounded by timeout, runs the tests, and calls the
// teardown setup returned (also when setup fails, if it returned one). It returns the
// exit code for os.Exit: a failure too when an SDK call broke the OpenAPI document
// (openapi.go). Unless -parallel is given, up to Parallel tests that call
// t.Parallel run at once (see Parallel).
func Main(m *testing.M, name string, timeout time.Duration, setup func(ctx context.Context, dir string) (teardown func(), err error)) int {
	DefaultParallel(Parallel)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "opendlc-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	report, err := validateOpenAPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+" setup:", err)
		return 1
	}
	teardown, err := setup(ctx, dir)
	if teardown != nil {
		defer teardown()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+" setup:", err)
		return 1
	}
	code := m.Run()
	if err := report(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	return code
}

// Parallel is how many of a package's tests that call t.Parallel run at once when the
// command line does not say (-parallel). Go's default, GOMAXPROCS, suits tests that
// compute; these tests mostly wait on a stack (a workflow's timers, a replica's sleep,
// a poll), so more of them share the cores. They start only once every serial test of
// the package has ended, so a test that kills the shared worker, restarts a server or
// changes a global setting stays serial and never overlaps them.
const Parallel = 4

// DefaultParallel sets -test.parallel to n unless the command line set it. Main sets
// Parallel; a package whose parallel tests are bounded otherwise calls it with its own n
// before Main.
func DefaultParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && flag.Lookup("test.parallel") != nil {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// Logger is a text logger on stderr at level.
func Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// StartStack starts an embedded stack of a test's own, closed when the test ends. Where
// cfg leaves them unset, its state lies in a temporary directory, the API listens on a
// free port and it logs errors only.
func StartStack(t testing.TB, ctx context.Context, cfg embedded.Config) *embedded.Embedded {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "stack")
	}
	if cfg.APIAddr == "" {
		cfg.APIAddr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = Logger(slog.LevelError)
	}
	e, err := embedded.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// Client is an SDK client of a stack's API with its admin token. Its calls are
// validated against the OpenAPI document (openapi.go).
func Client(e *embedded.Embedded) (*dlc.Client, error) {
	hc, err := validatingHTTPClient()
	if err != nil {
		return nil, err
	}
	return dlc.New(e.APIURL, dlc.WithToken(e.AdminToken), dlc.WithHTTPClient(hc))
}

// AdminClient is Client, failing the test on error.
func AdminClient(t testing.TB, e *embedded.Embedded) *dlc.Client {
	t.Helper()
	c, err := Client(e)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build puts the package pkg of the repository (such as "./cmd/dlc"), built static, at
// out. The build is shared (internal/gobuild): the test packages of one run, which go
// test runs at once, and the images built from the same tree link it once.
func Build(ctx context.Context, pkg, out string) error {
	return gobuild.Copy(ctx, Root(), pkg, out, gobuild.Options{})
}

// LongHeartbeatTimeout is the test workers' --long-heartbeat-timeout (WorkerArgs): a
// killed worker's job watches and log forwarders move to its replacement after 15 s
// instead of the default minute, which the tests that kill a worker would otherwise
// wait out. At 15 s the heartbeat pacer's interval cap (a third, 5 s) is still above
// the interval of integration/kube's TestScaleWatchCostGrowsSubLinearly at 25 jobs (50
// activities over a budget of 10 a second), so the rate it measures stays flat.
const LongHeartbeatTimeout = 15 * time.Second

// WorkerArgs are the arguments of `dlc worker` against a stack: its Temporal address
// and namespace, its NATS URL (and CA, over TLS) and --long-heartbeat-timeout
// LongHeartbeatTimeout, followed by extra. WorkerEnv carries the NATS credentials.
func WorkerArgs(e *embedded.Embedded, extra ...string) []string {
	s := e.Stack
	args := []string{"worker", "--temporal", s.Temporal.Address, "--namespace", s.Temporal.Namespace,
		"--nats", s.NATS.URL, "--long-heartbeat-timeout", LongHeartbeatTimeout.String()}
	if s.NATS.CAFile != "" {
		args = append(args, "--nats-tls-ca", s.NATS.CAFile)
	}
	if e.RunsDatabase != "" {
		args = append(args, "--runs-database", e.RunsDatabase)
	}
	return append(args, extra...)
}

// WorkerEnv is this process's environment with a stack's S3 settings
// (embedded.ReplicaEnv), for a `dlc worker` process and the replicas it starts.
func WorkerEnv(e *embedded.Embedded) []string {
	env := append(os.Environ(), "DLC_NATS_USER="+devstack.NATSUserWorker,
		"DLC_NATS_PASSWORD="+e.Stack.NATS.Password(devstack.NATSUserWorker))
	for _, v := range e.ReplicaEnv() {
		env = append(env, v.Name+"="+v.Value)
	}
	return env
}

// Context is a context that ends after d or with the test.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Submit submits a job spec, failing the test on error.
func Submit(t testing.TB, ctx context.Context, c *dlc.Client, spec string) *api.Job {
	t.Helper()
	j, err := c.SubmitJob(ctx, []byte(spec))
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return j
}

// WaitJob polls a job every PollInterval until cond holds, failing the test at ctx's
// deadline with what the job never became and its last status.
func WaitJob(t testing.TB, ctx context.Context, c *dlc.Client, ws, name, what string, cond func(*api.Job) bool) *api.Job {
	t.Helper()
	var last *api.Job
	testutil.Eventually(t, Left(ctx), fmt.Sprintf("job %s/%s to become %s", ws, name, what), func() error {
		j, err := c.GetJob(ctx, ws, name)
		if err != nil {
			return fmt.Errorf("last status: %+v (err %w)", last, err)
		}
		last = j
		if !cond(j) {
			return fmt.Errorf("last status: %+v", j)
		}
		return nil
	}, PollInterval)
	return last
}

// JobDoc is the YAML of a TrainingJob named name in workspace ws whose spec is spec:
// YAML lines indented by two spaces ("  framework: custom\n  command: ...").
func JobDoc(name, ws, spec string) string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
`, name, ws) + strings.TrimPrefix(spec, "\n")
}

// ShellJob is a TrainingJob of one custom replica that runs command with sh -c.
func ShellJob(ws, name, command string) string {
	return JobDoc(name, ws, fmt.Sprintf(`
  framework: custom
  command: [sh, -c, %q]
  roles: {worker: {replicas: 1}}
`, command))
}

// RawS3 is a plain S3 client on a stack's gateway, and the bucket and prefix of uri: it
// writes and lists objects behind the checkpoint package's back.
func RawS3(t testing.TB, e *embedded.Embedded, uri string) (client *s3.Client, bucket, prefix string) {
	t.Helper()
	cfg := e.S3Config()
	client = s3.New(s3.Options{
		BaseEndpoint: aws.String(cfg.Endpoint), Region: cfg.Region, UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: cfg.AccessKey, SecretAccessKey: cfg.SecretKey}, nil
		}),
	})
	bucket, prefix, err := checkpoint.ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	return client, bucket, prefix
}

// StartWorker runs `dlc worker` (the binary bin) against a stack with the arguments
// WorkerArgs makes of extra and the environment of WorkerEnv, its output appended to
// logPath. Stop it with SIGKILL (no chance to clean up) or SIGTERM.
func StartWorker(bin string, e *embedded.Embedded, logPath string, extra ...string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, WorkerArgs(e, extra...)...)
	cmd.Env = WorkerEnv(e)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	// The child has its own descriptor; ours is not needed once it runs.
	logf.Close()
	return cmd, nil
}

// JobLogs returns every log record of a job, as the API serves them.
func JobLogs(t testing.TB, ctx context.Context, c *dlc.Client, ws, name string) []events.LogRecord {
	t.Helper()
	var recs []events.LogRecord
	if err := c.Logs(ctx, ws, name, dlc.LogOptions{}, func(r events.LogRecord) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatalf("logs: %v", err)
	}
	return recs
}

// ResourceSamples reads a job's resource samples (events.TypeJobResources) of the last
// hour through c, in stream order.
func ResourceSamples(t testing.TB, ctx context.Context, c *dlc.Client, ws, job string) []events.ResourceData {
	t.Helper()
	var out []events.ResourceData
	if err := c.Events(ctx, ws, dlc.EventOptions{Type: events.TypeJobResources, Job: job, Since: time.Hour}, func(ev events.Event) error {
		var d events.ResourceData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return fmt.Errorf("resource sample %s: %w", ev.ID, err)
		}
		out = append(out, d)
		return nil
	}); err != nil {
		t.Fatalf("resource samples of %s: %v", job, err)
	}
	return out
}

// PostgresDir is a state directory for a stack with PostgreSQL
// (embedded.Config.TemporalOnPostgres): the server runs as the postgres user, which
// must be able to reach it, so it is made under the system's temporary directory with
// mode 0755 rather than under t.TempDir (0700). It is removed when the test ends.
func PostgresDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "opendlc-postgres-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
