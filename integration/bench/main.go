// Command bench measures OpenDLC's per-job overhead on the embedded stack: for a trivial
// 1-replica job, the time from submit to the process starting and from the process
// exiting to the job being Succeeded, as p50/p99 over many jobs, next to the time it
// takes to start the same process directly (the floor), and the worker's peak memory.
// The worker runs as its own process (`dlc worker`) so its memory is its own. Then the
// time from SIGKILL of a trainer replica to the first metric line of the resumed
// attempt, next to resuming the trainer directly (recovery.go). With -kube: submit to
// pods Running, and recovery from pod and node failures next to Kubernetes' own. With
// -frameworks: submit to the first all-reduce of the PyTorch DDP example, next to the
// same processes started by hand (frameworks.go).
//
//	go tool -modfile=tools/go.mod task bench     # or: go run ./integration/bench -dlc bin/dlc
//	go tool -modfile=tools/go.mod task bench:frameworks
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // -pprof-addr
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

func main() {
	jobs := flag.Int("jobs", 50, "number of jobs (run one after another)")
	dlcBin := flag.String("dlc", "bin/dlc", "dlc binary, for the worker process")
	kubeMode := flag.Bool("kube", false, "measure submit -> all pods Running on the Kubernetes test control plane instead")
	recoveries := flag.Int("recoveries", 5, "number of SIGKILL recoveries of the example trainer to time (0: none)")
	defaultEviction := flag.Bool("default-eviction", true, "with -kube, also wait out Kubernetes' default 300s not-ready toleration (about 5 minutes)")
	frameworks := flag.Bool("frameworks", false, "measure submit -> first all-reduce of the PyTorch DDP example against the same processes started by hand instead")
	runs := flag.Int("runs", 5, "with -frameworks, -kube and -first-job, runs per side and size")
	sizes := flag.String("sizes", "1,8,64,256", "with -kube, the job sizes (replicas) to launch")
	leaseRuns := flag.Int("lease-runs", 5, "with -kube, runs of the lost node heartbeat (lease expiry) recovery (0: none)")
	firstJob := flag.Int("first-job", 0, "time this many workspaces' first jobs and a few later ones on one warm worker (firstjob.go) instead")
	scale := flag.Bool("scale", false, "run many jobs at once on the Kubernetes test control plane (scale.go) instead")
	scaleNodes := flag.Int("scale-nodes", 200, "with -scale, kwok nodes")
	scaleJobs := flag.Int("scale-jobs", 1000, "with -scale, jobs running at the end")
	scaleReplicas := flag.Int("scale-replicas", 10, "with -scale, pods per job")
	scalePoints := flag.String("scale-points", "10,100,1000", "with -scale, running-job counts at which the RPC rate is measured")
	scalePoll := flag.Duration("scale-poll", 5*time.Second, "with -scale, how often the bench lists the jobs while it waits (each listing is a visibility query per workspace)")
	scaleRuns := flag.Int("scale-runs", 1, "with -scale, whole runs, each on a fresh stack, then min/median/max of each figure over them")
	scaleWindows := flag.Int("scale-windows", 5, "with -scale, 30 s measuring windows of the RPC rate at each point")
	scaleGrace := flag.Duration("scale-node-grace", 2*time.Minute, "with -scale, the node monitor grace period: how late kwok may renew its nodes' leases before their pods are evicted")
	scaleBudget := flag.Float64("scale-heartbeat-budget", 0, "with -scale, the worker's --heartbeat-budget (0: the default)")
	scaleQPS := flag.Float64("scale-kube-qps", kube.DefaultClientQPS, "with -scale, the worker's --kube-qps: its client-side requests a second to the API server")
	scaleBurst := flag.Int("scale-kube-burst", kube.DefaultClientBurst, "with -scale, the worker's --kube-burst")
	scalePostgres := flag.Bool("scale-temporal-postgres", false, "with -scale, run the Temporal server on PostgreSQL (the production server) instead of the dev server on SQLite")
	kubeRecovery := flag.Bool("kube-recovery", true, "with -kube, also measure recovery (pod and node failures, lost heartbeats) after the launch")
	flag.BoolVar(&kubeForwardLogs, "kube-logs", true, "with -kube, OpenDLC's jobs forward their pods' logs (false: spec.logs.forward false, as the baseline reads no log)")
	launchTrace := flag.Bool("launch-trace", false, "with -kube, also print where each launch's time went (pods seen, Temporal activities)")
	localTrace := flag.Int("local-trace", 0, "without a mode, also print the Temporal history of the last N jobs, with their process's start and exit, in ms after the submit")
	pprofAddr := flag.String("pprof-addr", "", "serve net/http/pprof of this process (the worker, with -kube and -scale) on this address, such as 127.0.0.1:6060")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (with -kube and -scale: the worker, API and informers) to this file")
	flag.Parse()
	if *pprofAddr != "" {
		go func() {
			if err := http.ListenAndServe(*pprofAddr, nil); err != nil { //nolint:gosec // a local debugging endpoint
				fmt.Fprintln(os.Stderr, "bench: -pprof-addr:", err)
			}
		}()
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			os.Exit(2)
		}
		defer stop()
	}
	if *firstJob > 0 {
		if err := runFirstJobRepeated(*dlcBin, *firstJob, *runs); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *scale {
		points, err := parseSizes(*scalePoints)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -scale-points:", err)
			os.Exit(2)
		}
		if err := runScaleRepeated(scaleOptions{nodes: *scaleNodes, jobs: *scaleJobs, replicas: *scaleReplicas, workspaces: 10,
			points: points, window: 30 * time.Second, windows: *scaleWindows, nodeGrace: *scaleGrace, pollEvery: *scalePoll, heartbeatBudget: *scaleBudget,
			kubeQPS: *scaleQPS, kubeBurst: *scaleBurst, temporalOnPostgres: *scalePostgres}, *scaleRuns); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *frameworks {
		if err := runFrameworks(*runs); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *kubeMode {
		kubeSizes, err := parseSizes(*sizes)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -sizes:", err)
			os.Exit(2)
		}
		if err := runKube(kubeSizes, *runs, *defaultEviction, *leaseRuns, *kubeRecovery, *launchTrace); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*jobs, *dlcBin, *recoveries, *localTrace); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseSizes reads a comma-separated list of positive integers.
func parseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number of replicas", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// probe prints the wall clock in nanoseconds as soon as the process starts, and again
// as its last act before it exits.
var probe = []string{"sh", "-c", "date +%s%N; date +%s%N"}

func run(n int, dlcBin string, recoveries, localTrace int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "opendlc-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	floor, err := measureFloor(ctx, n)
	if err != nil {
		return err
	}

	e, worker, stop, err := stackWithWorker(ctx, dir, dlcBin)
	if err != nil {
		return err
	}
	defer stop()

	c, err := itest.Client(e)
	if err != nil {
		return err
	}
	// Every status event as a live subscriber receives it: phase change → delivery.
	nc, err := nats.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	var latMu sync.Mutex
	var eventLatency []time.Duration
	ended := newEndWatch()
	sub, err := nc.Subscribe("dlc.bench.job.*.status", func(m *nats.Msg) {
		var ev events.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			latMu.Lock()
			eventLatency = append(eventLatency, time.Since(ev.Time))
			latMu.Unlock()
			ended.observe(ev)
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()

	var toStart, toDone, total []time.Duration
	var jobs []jobTimes
	for i := range n {
		j, err := oneJob(ctx, c, ended, i)
		if err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
		jobs = append(jobs, j)
		toStart, toDone, total = append(toStart, j.toStart()), append(toDone, j.toDone()), append(total, j.total())
	}
	for i := max(n-localTrace, 0); i < n; i++ {
		tr := jobs[i]
		fmt.Printf("job bench-%d: process started %.1f ms, exited %.1f ms, Succeeded at %.1f ms after the submit\n", i,
			ms(tr.started.Sub(tr.submit)), ms(tr.exited.Sub(tr.submit)), ms(tr.succeeded.Sub(tr.submit)))
		if err := printJobHistory(ctx, e.AppConfig(app.Config{}).TemporalAddress, "bench", fmt.Sprintf("bench-%d", i), tr.submit); err != nil {
			return err
		}
	}
	var logRates, rawRates []float64
	for r := range logRuns {
		logRate, rawRate, err := measureLogs(ctx, c, nc, e.Stack.NATS, logLines, r)
		if err != nil {
			return err
		}
		logRates, rawRates = append(logRates, logRate), append(rawRates, rawRate)
	}
	trials, err := measureTrialOverhead(ctx, c, trialBench)
	if err != nil {
		return err
	}
	peak, err := peakRSS(worker.Process.Pid)
	if err != nil {
		return err
	}
	latMu.Lock()
	lat := append([]time.Duration(nil), eventLatency...)
	latMu.Unlock()

	fmt.Printf("OpenDLC job overhead, embedded stack, local backend, %d sequential 1-replica jobs\n\n", n)
	// Only "submit -> process started" has a baseline doing the same work (starting the
	// process); the other rows are OpenDLC's cost alone.
	fmt.Printf("%-44s %10s %10s %10s %10s\n", "measure", "min", "p50", "p99", "max")
	row := func(name string, xs []time.Duration) {
		fmt.Printf("%-44s %10s %10s %10s %10s\n", name, pct(xs, 0), pct(xs, 50), pct(xs, 99), pct(xs, 100))
	}
	row("baseline: exec the process -> its first line", floor)
	row("submit -> process started", toStart)
	row("process exiting -> job Succeeded", toDone)
	row("submit -> Succeeded event seen by the client", total)
	// With 50 jobs p99 is the slowest, which is the worker's first job (cold; see
	// firstjob.go and docs/performance.md): show it apart, and the warm jobs alone.
	if len(toStart) > 1 {
		fmt.Printf("first job (cold worker): submit -> process started %s; the %d later jobs: p50 %s, p99 %s\n",
			toStart[0].Round(time.Millisecond), len(toStart)-1, pct(toStart[1:], 50), pct(toStart[1:], 99))
	}
	fmt.Printf("\nstatus event: phase change -> live subscriber, %d events: p50 %s, p99 %s\n", len(lat), pct(lat, 50), pct(lat, 99))
	fmt.Printf("\nlog lines/s, first to last arrival at a live subscriber, %d lines from %d replicas (publishers), %d runs each:\n", logLines, logReplicas, logRuns)
	fmt.Printf("%-44s %10s %10s %10s\n", "side", "min", "median", "max")
	fmt.Printf("%-44s %10.0f %10.0f %10.0f\n", "JetStream publish, same batches (baseline)", slices.Min(rawRates), medianF(rawRates), slices.Max(rawRates))
	fmt.Printf("%-44s %10.0f %10.0f %10.0f   median ratio %.2f\n", "OpenDLC: replica stdout -> forwarder", slices.Min(logRates), medianF(logRates), slices.Max(logRates),
		medianF(logRates)/medianF(rawRates))
	fmt.Printf("HPO trial overhead, %d one-second trials one at a time: trial decided -> process started p50 %s, p99 %s (%.1f%% of a %ds trial at p50)\n",
		len(trials), pct(trials, 50), pct(trials, 99), 100*pct(trials, 50).Seconds()/trialSeconds, trialSeconds)
	fmt.Printf("\nworker peak memory (VmHWM): %.1f MiB\n", float64(peak)/(1<<20))
	if len(toStart) > 1 {
		atMostDur("local: submit -> process started, p50 of the jobs after the first", pct(toStart[1:], 50), 50*time.Millisecond)
		atMostDur("local: submit -> process started, p99 of the jobs after the first", pct(toStart[1:], 99), 100*time.Millisecond)
	}
	atMostDur("local: process exiting -> job Succeeded, p50", pct(toDone, 50), 30*time.Millisecond)
	atMostDur("HPO: trial decided -> process started, p50", pct(trials, 50), 30*time.Millisecond)
	atLeastRatio("log forwarding: median lines/s over raw JetStream's", medianF(logRates)/medianF(rawRates), 0.9)
	defer printGoals()

	if recoveries > 0 {
		trainer := filepath.Join(dir, "trainer")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", trainer, "./examples/trainer").CombinedOutput(); err != nil {
			return fmt.Errorf("build the example trainer: %w\n%s", err, out)
		}
		store, err := checkpoint.NewStore(e.S3Config())
		if err != nil {
			return err
		}
		var s3env []string
		for _, v := range e.ReplicaEnv() {
			s3env = append(s3env, v.Name+"="+v.Value)
		}
		return runLocalRecovery(ctx, c, store, trainer, s3env, recoveries)
	}
	return nil
}

// trialBench is how many trials the HPO overhead measure runs.
const trialBench = 8

// logLines is how many lines the log-forwarding measure sends (logReplicas replicas),
// logRuns times on each side.
const (
	logLines = 100000
	logRuns  = 5
)

// medianF is the median of xs.
func medianF(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// logReplicas is how many replicas (and baseline publishers) the log measure has.
const logReplicas = 4

// measureLogs runs a logReplicas-replica job whose replicas print n lines in all as
// fast as they can, and times the records reaching a live subscriber of its log subjects,
// from the first arrival to the last; then, for the baseline, logReplicas concurrent
// publishers send the same number of records straight to JetStream in the batches the
// forwarder uses, timed the same way at the same kind of subscriber. Run r of runs uses
// job loglines-r.
func measureLogs(ctx context.Context, c *client.Client, nc *nats.Conn, srv *devstack.NATS, n, r int) (forwarded, raw float64, err error) {
	per := n / logReplicas
	job := fmt.Sprintf("loglines-%d", r)
	forwarded, err = arrivalRate(ctx, nc, "dlc.bench.job."+job+".logs.>", per*logReplicas, func() error {
		spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":%q,"workspace":"bench"},
"spec":{"framework":"custom","command":["sh","-c","seq 1 %d | sed 's/^/log line number /'"],"roles":{"worker":{"replicas":%d}}}}`, job, per, logReplicas)
		_, err := c.SubmitJob(ctx, []byte(spec))
		return err
	})
	if err != nil {
		return 0, 0, err
	}

	js, err := jetstream.Connect(srv.URL, srv.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		return 0, 0, err
	}
	defer js.Close()
	rawJob := fmt.Sprintf("raw-%d", r)
	raw, err = arrivalRate(ctx, nc, "dlc.bench.job."+rawJob+".logs.>", per*logReplicas, func() error {
		errs := make(chan error, logReplicas)
		for p := range logReplicas {
			go func() { errs <- publishLogs(ctx, js, rawJob, p, per) }()
		}
		for range logReplicas {
			if err := <-errs; err != nil {
				return err
			}
		}
		return nil
	})
	return forwarded, raw, err
}

// arrivalStall is how long arrivalRate waits for the next message once the sender is
// done, before it gives up on the ones missing.
const arrivalStall = time.Minute

// arrivalRate subscribes to subject, runs send, and returns the rate at which want
// messages arrived, from the first arrival to the last.
func arrivalRate(ctx context.Context, nc *nats.Conn, subject string, want int, send func() error) (float64, error) {
	var mu sync.Mutex
	var first, last time.Time
	got := 0
	done := make(chan struct{})
	sub, err := nc.Subscribe(subject, func(*nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if got == 0 {
			first = now
		}
		got++
		last = now
		if got == want {
			close(done)
		}
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	// No message is dropped on this side for being read late, and the server has the
	// subscription before the first message is sent: the sender publishes on another
	// connection, which the server may otherwise route before it reads this one's SUB.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return 0, err
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return 0, err
	}
	if err := send(); err != nil {
		return 0, err
	}
	missing := func() error {
		dropped, _ := sub.Dropped()
		return fmt.Errorf("%s: only %d of %d messages arrived (%d dropped by the client)", subject, got, want, dropped)
	}
	stall := time.NewTicker(arrivalStall)
	defer stall.Stop()
	seen := -1
	for {
		select {
		case <-done:
			mu.Lock()
			defer mu.Unlock()
			return float64(want) / last.Sub(first).Seconds(), nil
		case <-stall.C:
			mu.Lock()
			if got == seen {
				defer mu.Unlock()
				return 0, missing()
			}
			seen = got
			mu.Unlock()
		case <-ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			return 0, missing()
		}
	}
}

// publishLogs publishes n log records of replica p of job to JetStream, 256 to a batch.
func publishLogs(ctx context.Context, js *jetstream.Client, job string, p, n int) error {
	subject := events.JobLogSubject("bench", job, "worker", p)
	batch := make([]events.Msg, 0, 256)
	for i := range n {
		rec, _ := json.Marshal(events.LogRecord{Workspace: "bench", Job: job, UID: "01a22e0b-0dc1-798f-86b5-3b6f224da20b",
			Role: "worker", Replica: fmt.Sprintf("%s-worker-%d-a0", job, p), Stream: "stdout", Time: time.Now(),
			Line: "log line number " + strconv.Itoa(i+1)})
		batch = append(batch, events.Msg{Subject: subject, ID: fmt.Sprintf("%s-%d-%d", job, p, i), Data: rec})
		if len(batch) == cap(batch) || i == n-1 {
			if err := js.Publish(ctx, batch...); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}

// measureFloor starts the probe directly n times: the time from exec to its first line.
func measureFloor(ctx context.Context, n int) ([]time.Duration, error) {
	var out []time.Duration
	for range n {
		t0 := time.Now()
		b, err := exec.CommandContext(ctx, probe[0], probe[1:]...).Output()
		if err != nil {
			return nil, err
		}
		ts, err := parseNanos(strings.SplitN(string(b), "\n", 2)[0])
		if err != nil {
			return nil, err
		}
		out = append(out, ts.Sub(t0))
	}
	return out, nil
}

func oneJob(ctx context.Context, c *client.Client, ended *endWatch, i int) (jobTimes, error) {
	return oneJobIn(ctx, c, ended, "bench", i)
}

// jobTimes is when a bench job was submitted, its process started and exited (the
// probe's stamps), its timeline says it succeeded, and the client saw it end.
type jobTimes struct{ submit, started, exited, succeeded, seen time.Time }

func (j jobTimes) toStart() time.Duration { return j.started.Sub(j.submit) }
func (j jobTimes) toDone() time.Duration  { return j.succeeded.Sub(j.exited) }
func (j jobTimes) total() time.Duration   { return j.seen.Sub(j.submit) }

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// endWatch tells when a job's terminal status event reaches the bench, a live
// subscriber of the status events: how a client learns of a job's end without asking.
// The bench used to ask (a status query every 5 ms: a workflow query through Temporal
// and the worker, 200 a second), which loaded the two cores that the measured path
// (the worker, Temporal, the replica's start) runs on.
type endWatch struct {
	mu    sync.Mutex
	ended map[string]chan struct{}
}

func newEndWatch() *endWatch { return &endWatch{ended: map[string]chan struct{}{}} }

// ch is closed once job's terminal status event has arrived.
func (w *endWatch) ch(job string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.ended[job]
	if !ok {
		c = make(chan struct{})
		w.ended[job] = c
	}
	return c
}

// observe takes a status event.
func (w *endWatch) observe(ev events.Event) {
	var d events.JobPhaseData
	if json.Unmarshal(ev.Data, &d) != nil || !schemas.JobPhase(d.Phase).Terminal() {
		return
	}
	c := w.ch(d.Job)
	select {
	case <-c:
	default:
		close(c)
	}
}

// oneJobIn runs job bench-i in workspace ws (see oneJob). With ended, it waits for the
// job's terminal status event before it reads the job; without, it asks for the job's
// status every 5 ms.
func oneJobIn(ctx context.Context, c *client.Client, ended *endWatch, ws string, i int) (jobTimes, error) {
	name := fmt.Sprintf("bench-%d", i)
	spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":%q,"workspace":%q},
"spec":{"framework":"custom","command":[%q,%q,%q],"roles":{"worker":{"replicas":1}}}}`, name, ws, probe[0], probe[1], probe[2])
	t0 := time.Now()
	if _, err := c.SubmitJob(ctx, []byte(spec)); err != nil {
		return jobTimes{}, err
	}
	if ended != nil {
		select {
		case <-ended.ch(name):
		case <-ctx.Done():
			return jobTimes{}, ctx.Err()
		}
	}
	var j *api.Job
	var err error
	for {
		if j, err = c.GetJob(ctx, ws, name); err != nil {
			// A query waits for the worker; on a loaded machine the API's query
			// timeout can pass before the job's first workflow task. Ask again.
			if ctx.Err() != nil {
				return jobTimes{}, err
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if j.Status.Phase.Terminal() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	seen := time.Now()
	if j.Status.Phase != schemas.JobSucceeded {
		return jobTimes{}, fmt.Errorf("job ended %s: %s", j.Status.Phase, j.Status.Message)
	}
	// The probe's first line is its start, its last the moment before it exits.
	var stamps []time.Time
	err = c.Logs(ctx, ws, name, client.LogOptions{}, func(r events.LogRecord) error {
		ts, err := parseNanos(r.Line)
		stamps = append(stamps, ts)
		return err
	})
	if err != nil || len(stamps) != 2 {
		return jobTimes{}, fmt.Errorf("probe output not found in logs (%d lines): %w", len(stamps), err)
	}
	return jobTimes{submit: t0, started: stamps[0], exited: stamps[1],
		succeeded: j.Status.Timeline[len(j.Status.Timeline)-1].Time, seen: seen}, nil
}

func parseNanos(s string) (time.Time, error) {
	ns, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("probe printed %q: %w", s, err)
	}
	return time.Unix(0, ns), nil
}

func pct(xs []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), xs...)
	slices.Sort(s)
	i := max((len(s)*p+99)/100, 1)
	return s[i-1].Round(10 * time.Microsecond)
}

// peakRSS reads a process's peak resident set size from /proc.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
