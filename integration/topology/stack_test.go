package topology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opendlc/opendlc/auth"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
)

// replicas is the stream replica count every process declares.
const replicas = 3

// topo is the production topology: the servers, and the OpenDLC processes on them.
type topo struct {
	dir      string
	dlc      string // the dlc binary
	postgres *devstack.Postgres
	temporal *devstack.TemporalServer
	nats     *devstack.NATSCluster
	s3       *devstack.S3
	token    string // the admin token both API servers install
	apiPorts [2]int
	apis     [2]*dlcProc
	workers  [2]*dlcProc
	notifier *dlcProc
	clients  [2]*dlc.Client
	// hook receives the notifier's deliveries.
	hook *hookServer
}

// timed runs f and logs how long it took as what.
func timed(t *testing.T, what string, f func() error) {
	t.Helper()
	start := time.Now()
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("wall time: %s took %s", what, time.Since(start).Round(time.Millisecond))
}

// startTopology starts every server, then two API servers and two workers on them.
func startTopology(t *testing.T, ctx context.Context) *topo {
	t.Helper()
	// The postgres user must reach the database directory when the test runs as root:
	// a directory of its own under the system's temporary directory, open to others.
	dir, err := os.MkdirTemp("", "opendlc-topology-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tp := &topo{dir: dir}
	t.Cleanup(func() {
		tp.close()
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("state and logs kept in %s", dir)
			logWarnings(t, dir)
		}
	})

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() {
		start := time.Now()
		bin := filepath.Join(dir, "dlc")
		if err := itest.Build(ctx, "./cmd/dlc", bin); err != nil {
			errs <- err
			return
		}
		tp.dlc = bin
		t.Logf("wall time: build dlc took %s", time.Since(start).Round(time.Millisecond))
	})
	wg.Go(func() {
		start := time.Now()
		pg, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: filepath.Join(dir, "postgres")})
		if err != nil {
			errs <- err
			return
		}
		tp.postgres = pg
		t.Logf("wall time: PostgreSQL initdb and start took %s", time.Since(start).Round(time.Millisecond))
		start = time.Now()
		ts, err := devstack.StartTemporalServer(ctx, devstack.TemporalServerOptions{
			Dir: filepath.Join(dir, "temporal"), Postgres: pg, Namespace: "opendlc", Retention: 72 * time.Hour,
		})
		if err != nil {
			errs <- err
			return
		}
		tp.temporal = ts
		t.Logf("wall time: Temporal server %s took %s (schema setup %s), frontend %s", ts.Version,
			time.Since(start).Round(time.Millisecond), ts.SchemaSetup.Round(time.Millisecond), ts.Address)
	})
	wg.Go(func() {
		start := time.Now()
		c, err := devstack.StartNATSCluster(ctx, devstack.NATSClusterOptions{Dir: filepath.Join(dir, "nats"), Secure: true})
		if err != nil {
			errs <- err
			return
		}
		tp.nats = c
		t.Logf("wall time: NATS cluster of %d took %s", len(c.Nodes), time.Since(start).Round(time.Millisecond))
		start = time.Now()
		s3, err := devstack.StartS3(ctx, devstack.S3Options{Dir: filepath.Join(dir, "s3"), Buckets: []string{"dlc"}})
		if err != nil {
			errs <- err
			return
		}
		tp.s3 = s3
		t.Logf("wall time: S3 gateway took %s", time.Since(start).Round(time.Millisecond))
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	token, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tp.token = token
	for i := range tp.apiPorts {
		if tp.apiPorts[i], err = freePort(); err != nil {
			t.Fatal(err)
		}
	}
	tp.hook = newHookServer(t)
	timed(t, "start 2 API servers, 2 workers and the notifier", func() error {
		// The first declares the replicated streams; the others then find them.
		tp.startAPI(t, 0)
		if err := tp.waitAPI(ctx, 0); err != nil {
			return err
		}
		tp.startAPI(t, 1)
		tp.startWorker(t, 0)
		tp.startWorker(t, 1)
		tp.startNotifier(t)
		for i := range 2 {
			if err := tp.waitAPI(ctx, i); err != nil {
				return err
			}
			c, err := dlc.New(tp.apiURL(i), dlc.WithToken(token))
			if err != nil {
				return err
			}
			tp.clients[i] = c
		}
		return nil
	})
	return tp
}

func (tp *topo) close() {
	for _, p := range append(append(tp.apis[:], tp.workers[:]...), tp.notifier) {
		if p != nil {
			p.stop()
		}
	}
	if tp.temporal != nil {
		_ = tp.temporal.Close()
	}
	if tp.postgres != nil {
		_ = tp.postgres.Close()
	}
	if tp.s3 != nil {
		_ = tp.s3.Close()
	}
	if tp.nats != nil {
		_ = tp.nats.Close()
	}
}

func (tp *topo) apiURL(i int) string { return "http://127.0.0.1:" + strconv.Itoa(tp.apiPorts[i]) }

// common are the flags of every dlc process: Temporal, every NATS server, R3 streams.
func (tp *topo) common() []string {
	return []string{"--temporal", tp.temporal.Address, "--namespace", tp.temporal.Namespace,
		"--nats", tp.nats.URL(), "--nats-stream-replicas", strconv.Itoa(replicas)}
}

func (tp *topo) startAPI(t *testing.T, i int) {
	t.Helper()
	args := append([]string{"server", "--addr", "127.0.0.1:" + strconv.Itoa(tp.apiPorts[i]),
		"--admin-token-file", filepath.Join(tp.dir, "admin-token")}, tp.common()...)
	env := append(os.Environ(), "DLC_NATS_USER="+devstack.NATSUserServer,
		"DLC_NATS_PASSWORD="+tp.nats.Password(devstack.NATSUserServer))
	tp.apis[i] = startDLC(t, tp.dlc, fmt.Sprintf("api-%d", i), filepath.Join(tp.dir, fmt.Sprintf("api-%d.log", i)), args, env)
}

func (tp *topo) startWorker(t *testing.T, i int) {
	t.Helper()
	// Both workers share one local backend state directory: either carries on the
	// other's replicas.
	// A killed worker's job-long activities (the log forwarder, the gang watch) are
	// taken over once their heartbeat timeout passes: 15 s here, as the integration
	// tests' workers (itest.LongHeartbeatTimeout), not the 1 min default. The forwarder
	// taken over must send the rest of the job's 40,000 lines before the job's log
	// drain (2 min from the job's end) gives up; on a loaded CI machine the minute of
	// the default left it too little (CI lost 7,000 and 12,232 lines that way).
	args := append([]string{"worker", "--state-dir", filepath.Join(tp.dir, "local"), "--workdir", tp.dir,
		"--long-heartbeat-timeout", itest.LongHeartbeatTimeout.String()}, tp.common()...)
	env := append(os.Environ(), "DLC_NATS_USER="+devstack.NATSUserWorker,
		"DLC_NATS_PASSWORD="+tp.nats.Password(devstack.NATSUserWorker),
		"DLC_S3_ENDPOINT="+tp.s3.Endpoint, "AWS_REGION="+tp.s3.Region,
		"AWS_ACCESS_KEY_ID="+tp.s3.AccessKey, "AWS_SECRET_ACCESS_KEY="+tp.s3.SecretKey)
	tp.workers[i] = startDLC(t, tp.dlc, fmt.Sprintf("worker-%d", i), filepath.Join(tp.dir, fmt.Sprintf("worker-%d.log", i)), args, env)
}

// startNotifier starts the one notification dispatcher, as the API server's NATS
// identity, with loopback webhooks allowed (the test's receiver).
func (tp *topo) startNotifier(t *testing.T) {
	t.Helper()
	args := append([]string{"notifier", "--webhook-allow", "127.0.0.1"}, tp.common()...)
	env := append(os.Environ(), "DLC_NATS_USER="+devstack.NATSUserServer,
		"DLC_NATS_PASSWORD="+tp.nats.Password(devstack.NATSUserServer))
	tp.notifier = startDLC(t, tp.dlc, "notifier", filepath.Join(tp.dir, "notifier.log"), args, env)
}

// hookServer is a webhook receiver on loopback that keeps the CloudEvents it gets.
type hookServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	evs  []events.Event
	hits int
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var ev events.Event
		err := json.NewDecoder(r.Body).Decode(&ev)
		h.mu.Lock()
		h.hits++
		if err == nil {
			h.evs = append(h.evs, ev)
		}
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// received are the events delivered so far.
func (h *hookServer) received() []events.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]events.Event(nil), h.evs...)
}

// waitAPI polls API server i's /healthz until it answers 200.
func (tp *topo) waitAPI(ctx context.Context, i int) error {
	for {
		if err := tp.apis[i].exited(); err != nil {
			return err
		}
		if devstack.ProbeHTTP(ctx, tp.apiURL(i)+"/healthz") == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("API server %d never answered: %w; end of its log:\n%s", i, ctx.Err(), tp.apis[i].logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// events is a JetStream client of the cluster, as the API server.
func (tp *topo) events(t *testing.T) *jetstream.Client {
	t.Helper()
	js, err := jetstream.Connect(tp.nats.URL(), tp.nats.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Close)
	return js
}

// dlcProc is a `dlc server` or `dlc worker` process.
type dlcProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startDLC(t *testing.T, bin, name, logPath string, args, env []string) *dlcProc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &dlcProc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p
}

// kill sends SIGKILL and checks that the process really died of it.
func (p *dlcProc) kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	<-p.done
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return fmt.Errorf("%s ended with %v, not killed by SIGKILL", p.name, p.cmd.ProcessState)
	}
	return nil
}

// stop ends the process (SIGTERM, SIGKILL after 10 s) at the end of the test.
func (p *dlcProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// exited is an error saying how the process ended, or nil while it runs.
func (p *dlcProc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); end of its log:\n%s", p.name, p.cmd.ProcessState, p.logTail())
	default:
		return nil
	}
}

func (p *dlcProc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// refused checks that nothing accepts connections on 127.0.0.1:port.
func refused(port int) error {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("port %d still accepts connections", port)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("port %d: %w, want connection refused", port, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logWarnings logs the warnings and errors of the workers' logs in dir (at most
// maxWarnings of them), so that a failure on a machine whose files are gone afterwards
// (CI) still says what the workers saw.
func logWarnings(t *testing.T, dir string) {
	const maxWarnings = 60
	logs, _ := filepath.Glob(filepath.Join(dir, "worker-*.log"))
	n := 0
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
				continue
			}
			if n++; n > maxWarnings {
				t.Logf("(more warnings in %s)", dir)
				return
			}
			t.Logf("%s: %s", filepath.Base(path), line)
		}
	}
}
