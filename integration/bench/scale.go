package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/embedded"
	events "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/metrics"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// scaleOptions size the scale run (task bench:scale).
type scaleOptions struct {
	nodes, jobs, replicas, workspaces int
	// points are the numbers of running jobs at which the steady RPC rate is measured.
	points []int
	// window is how long each RPC rate is measured, windows how many times at each
	// point (one after another; rows give min, median and max).
	window  time.Duration
	windows int
	// nodeGrace is the controller manager's node monitor grace period (kubestack's
	// NodeMonitorGracePeriod): how late kwok may renew a node's Lease before the node
	// is marked not ready and its pods evicted.
	nodeGrace time.Duration
	// pollEvery is how often the bench lists the jobs while it waits for a phase.
	pollEvery time.Duration
	// heartbeatBudget is the worker's --heartbeat-budget; 0: the default.
	heartbeatBudget float64
	// kubeQPS and kubeBurst are the worker's client-side rate limit to the API server
	// (dlc worker --kube-qps, --kube-burst).
	kubeQPS   float64
	kubeBurst int
	// temporalOnPostgres runs the Temporal server on PostgreSQL instead of the dev
	// server on SQLite (embedded.Config.TemporalOnPostgres).
	temporalOnPostgres bool
}

// requestCounter counts the worker's requests to the Kubernetes API server, by verb
// (the HTTP method) and by whether they are watches, through the clientset's
// transport: what the API server sees of the worker.
type requestCounter struct {
	total, watches, gets, lists, writes, logs atomic.Int64
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.total.Add(1)
		q := r.URL.Query()
		switch {
		case strings.HasSuffix(r.URL.Path, "/log"):
			c.logs.Add(1)
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			c.watches.Add(1)
		case r.Method == http.MethodGet && looksLikeList(r.URL.Path):
			c.lists.Add(1)
		case r.Method == http.MethodGet:
			c.gets.Add(1)
		default:
			c.writes.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

// looksLikeList tells a list (…/pods) from a get (…/pods/NAME) by the path's shape:
// core paths /api/v1/namespaces/NS/RESOURCE have 5 segments, a named object 6.
func looksLikeList(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 2 && parts[0] == "api" {
		parts = parts[2:] // api/v1
	} else if len(parts) >= 3 && parts[0] == "apis" {
		parts = parts[3:] // apis/GROUP/VERSION
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return len(parts) == 1
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// snapshot is the counters at one moment.
type rpcSnapshot struct {
	at                     time.Time
	kube, kubeGet, kubeLst int64
	kubeWrite, kubeWatch   int64
	kubeLog                int64
	heartbeats, temporal   float64
	cpu                    time.Duration
}

func (c *requestCounter) snap(reg *metrics.Registry) rpcSnapshot {
	hb, all := temporalRequests(reg)
	return rpcSnapshot{
		at: time.Now(), kube: c.total.Load(), kubeGet: c.gets.Load(), kubeLst: c.lists.Load(),
		kubeWrite: c.writes.Load(), kubeWatch: c.watches.Load(), kubeLog: c.logs.Load(), heartbeats: hb, temporal: all, cpu: processCPU(),
	}
}

// temporalRequests reads the worker's Temporal client requests from its metrics:
// heartbeats (RecordActivityTaskHeartbeat) and all of them.
func temporalRequests(reg *metrics.Registry) (heartbeats, all float64) {
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		if mf.GetName() != "temporal_request_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue()
			all += v
			if label(m, "operation") == "RecordActivityTaskHeartbeat" {
				heartbeats += v
			}
		}
	}
	return heartbeats, all
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runScale runs o.jobs jobs of o.replicas pods at once on a kwok control plane of
// o.nodes nodes, with the worker in this process, and reports what docs/performance.md
// ("Scale") lists: the RPC rate of watching 10, 100, 1,000 running jobs, the admission
// rate, time to all Running, CPU and memory, API latency under load, history events,
// heartbeats and NATS messages per job.
func runScale(o scaleOptions) (scaleResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	dir, err := os.MkdirTemp("", "opendlc-bench-scale-")
	if err != nil {
		return scaleResult{}, err
	}
	defer os.RemoveAll(dir)
	temporal := "the Temporal dev server (SQLite)"
	if o.temporalOnPostgres {
		temporal = "the Temporal server on PostgreSQL"
		// PostgreSQL runs as the postgres user when this runs as root, and must reach
		// its directory below this one (devstack.PostgresOptions.Dir).
		if err := os.Chmod(dir, 0o755); err != nil {
			return scaleResult{}, err
		}
	}
	fmt.Printf("# scale: %d kwok nodes, up to %d jobs of %d pods in %d workspaces, worker's kube client %g requests/s (burst %d), %s, %d cores, load average %s at start\n",
		o.nodes, o.jobs, o.replicas, o.workspaces, o.kubeQPS, o.kubeBurst, temporal, runtime.NumCPU(), loadAvg())
	// Each run's peak RSS is its own: Linux resets VmHWM to the current RSS when "5" is
	// written to clear_refs (proc(5)). The Go runtime may still hold memory a run
	// before freed, so a later run's peak is at least what the process holds then.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		fmt.Printf("# peak RSS not reset (%v): it is the peak of every run so far\n", err)
	}
	counter := &requestCounter{}
	k, err := startKubeWorker(ctx, dir, kubeWorkerOptions{nodes: o.nodes, nodeGrace: o.nodeGrace, heartbeatBudget: o.heartbeatBudget, temporalOnPostgres: o.temporalOnPostgres, clientset: func(cluster *kubestack.Cluster) (kubernetes.Interface, error) {
		cfg := rest.CopyConfig(cluster.Admin)
		cfg.QPS, cfg.Burst = float32(o.kubeQPS), o.kubeBurst // dlc worker --kube-qps, --kube-burst
		cfg.WrapTransport = counter.wrap
		return kubernetes.NewForConfig(cfg)
	}})
	if err != nil {
		return scaleResult{}, err
	}
	defer k.close()
	c, w, e := k.c, k.w, k.e
	s := &scaleRun{o: o, c: c, counter: counter, reg: w.Metrics, e: e, trace: newAdmissionTrace()}
	err = s.run(ctx)
	return s.res, err
}

// scaleRun is one scale run's state.
type scaleRun struct {
	o         scaleOptions
	c         *client.Client
	counter   *requestCounter
	reg       *metrics.Registry
	e         *embedded.Embedded
	submitted int
	trace     *admissionTrace
	// lastCount is what waitPhase counted at its last listing.
	lastCount int
	res       scaleResult
}

func (s *scaleRun) run(ctx context.Context) error {
	msgs0, err := natsMessages(ctx, s.e.Stack.NATS)
	if err != nil {
		return err
	}
	fmt.Printf("\n## steady RPC rate of the worker while N jobs run (%d windows of %s at each point)\n\n", s.o.windows, s.o.window)
	rateHeader()
	var admission []time.Duration
	var runningTook time.Duration
	for _, n := range s.o.points {
		if n > s.o.jobs {
			break
		}
		start := time.Now()
		from, cpu0, self0 := s.submitted, childCPU(), processCPU()
		took, err := s.submitUpTo(ctx, n)
		if err != nil {
			return err
		}
		admission = append(admission, took)
		fmt.Printf("  %d -> %d jobs: submit -> Launching or later %s (%.1f jobs/s); this process's CPU %s (%.0f%%)\n", from, n,
			took.Round(time.Millisecond), float64(n-from)/took.Seconds(), (processCPU() - self0).Round(100*time.Millisecond),
			100*(processCPU()-self0).Seconds()/took.Seconds())
		printChildCPU(cpu0, childCPU(), took)
		rate := s.admissionSteps(ctx, from, n)
		if err := s.waitPhase(ctx, n, isRunning); err != nil {
			return err
		}
		runningTook = time.Since(start)
		share := cpuShares(cpu0, childCPU(), processCPU()-self0, n-from)
		fmt.Printf("  CPU per job, submit -> all Running: %s\n", share)
		time.Sleep(5 * time.Second) // a settling pause before the measuring windows
		s.res.points = append(s.res.points, pointResult{running: n, admission: rate, allRunning: runningTook, cpu: share, rates: s.measureRates(n)})
	}
	fmt.Printf("\n## the last step: %d jobs (%d pods)\n\n", s.submitted, s.submitted*s.o.replicas)
	last := admission[len(admission)-1]
	prev := 0
	if len(s.o.points) > 1 {
		prev = s.o.points[len(admission)-2]
	}
	fmt.Printf("submit -> Launching or later: %d jobs in %s (%.1f jobs/s)\n", s.submitted-prev, last.Round(time.Millisecond),
		float64(s.submitted-prev)/last.Seconds())
	fmt.Printf("submit -> all Running: %s\n", runningTook.Round(time.Millisecond))
	fmt.Printf("process CPU so far: %s; peak RSS %d MiB (this process: worker, API and informers; Temporal, NATS and the control plane run apart)\n",
		processCPU().Round(time.Second), selfPeakRSS()>>20)
	if err := s.apiLatency(ctx); err != nil {
		return err
	}
	if err := s.historyPerJob(ctx); err != nil {
		return err
	}
	msgs1, err := natsMessages(ctx, s.e.Stack.NATS)
	if err != nil {
		return err
	}
	s.res.natsPerJob = float64(msgs1-msgs0) / float64(s.submitted)
	s.res.peakRSS = selfPeakRSS()
	fmt.Printf("NATS messages per job (events and log streams, %d jobs): %.1f\n", s.submitted, s.res.natsPerJob)
	return nil
}

// rates are the worker's request rates in one measuring window, in rateColumns'
// order: kube requests (all, gets, lists, writes, log streams), heartbeats and all
// Temporal requests a second, and the process's CPU in percent of one core.
type rates [8]float64

var rateColumns = [8]string{"kube req/s", "get/s", "list/s", "write/s", "log/s", "heartbeat/s", "temporal/s", "CPU %"}

func rateHeader() {
	fmt.Printf("%-8s %-7s %-6s", "running", "window", "load")
	for _, c := range rateColumns {
		fmt.Printf(" %11s", c)
	}
	fmt.Println()
}

func (r rates) print(n int, window, load string) {
	fmt.Printf("%-8d %-7s %-6s", n, window, load)
	for _, v := range r {
		fmt.Printf(" %11.2f", v)
	}
	fmt.Println()
}

// measureRates measures the worker's steady request rates with n jobs running in
// s.o.windows windows one after another, prints each, then each column's min, median
// and max.
func (s *scaleRun) measureRates(n int) rates {
	var all []rates
	for w := range max(1, s.o.windows) {
		a := s.counter.snap(s.reg)
		time.Sleep(s.o.window)
		z := s.counter.snap(s.reg)
		secs := z.at.Sub(a.at).Seconds()
		r := rates{float64(z.kube - a.kube), float64(z.kubeGet - a.kubeGet), float64(z.kubeLst - a.kubeLst),
			float64(z.kubeWrite - a.kubeWrite), float64(z.kubeLog - a.kubeLog), z.heartbeats - a.heartbeats,
			z.temporal - a.temporal, 100 * (z.cpu - a.cpu).Seconds()}
		for i := range r {
			r[i] /= secs
		}
		r.print(n, strconv.Itoa(w+1), loadAvg())
		all = append(all, r)
	}
	var lo, mid, hi rates
	for i := range lo {
		col := make([]float64, len(all))
		for w, r := range all {
			col[w] = r[i]
		}
		slices.Sort(col)
		lo[i], mid[i], hi[i] = col[0], col[len(col)/2], col[len(col)-1]
	}
	lo.print(n, "min", "")
	mid.print(n, "median", "")
	hi.print(n, "max", "")
	return mid
}

// selfPeakRSS is this process's peak resident set size, 0 if unknown.
func selfPeakRSS() int64 {
	n, _ := peakRSS(os.Getpid())
	return n
}

func (s *scaleRun) workspace(i int) string { return fmt.Sprintf("scale-%d", i%s.o.workspaces) }
func jobName(i int) string                 { return fmt.Sprintf("job-%04d", i) }

// submitUpTo submits jobs until n are submitted, 16 at a time, and returns how long
// from the first submit until they all reached Launching or later.
func (s *scaleRun) submitUpTo(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for i := s.submitted; i < n; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":%q,"workspace":%q},
"spec":{"framework":"pytorch","image":"registry.local/train:1.4","command":["train"],"roles":{"worker":{"replicas":%d}}}}`,
				jobName(i), s.workspace(i), s.o.replicas)
			t0 := time.Now()
			_, err := s.c.SubmitJob(ctx, []byte(spec))
			s.trace.submitted(i, t0, time.Now())
			if err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, fmt.Errorf("submit %s: %w", jobName(i), err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	s.submitted = n
	if err := s.waitPhase(ctx, n, launchedOrLater); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func launchedOrLater(p schemas.JobPhase) bool {
	switch p {
	case "", schemas.JobPending, schemas.JobQueued, schemas.JobHealthCheck:
		return false
	}
	return true
}

func isRunning(p schemas.JobPhase) bool { return p == schemas.JobRunning }

// waitPhase polls the job lists until n jobs are in a phase ok accepts.
func (s *scaleRun) waitPhase(ctx context.Context, n int, ok func(schemas.JobPhase) bool) error {
	start, shown := time.Now(), time.Now()
	return poll(ctx, s.o.pollEvery, func() (bool, error) {
		if time.Since(shown) >= time.Minute { // a long wait shows how far it got
			shown = time.Now()
			fmt.Printf("  ... %s: %d of %d jobs counted at the last listing (load %s)\n", time.Since(start).Round(time.Second), s.lastCount, n, loadAvg())
		}
		count := 0
		for w := range min(s.o.workspaces, n) {
			token := ""
			for {
				l, err := s.c.ListJobs(ctx, s.workspace(w), client.ListOptions{Limit: 500, PageToken: token})
				if err != nil {
					return false, nil //nolint:nilerr // an overloaded API answers later
				}
				for _, j := range l.Items {
					if ok(j.Phase) {
						count++
					}
				}
				if token = l.NextPageToken; token == "" {
					break
				}
			}
		}
		s.lastCount = count
		return count >= n, nil
	})
}

// apiLatency times list and get (dlc job get and describe read the same endpoint)
// with every job running, 200 of each, 8 at a time.
func (s *scaleRun) apiLatency(ctx context.Context) error {
	measure := func(what string, call func(i int) error) (p50, p99 time.Duration) {
		var mu sync.Mutex
		var durs []time.Duration
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		var firstErr error
		failed := 0
		for i := range 200 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				t := time.Now()
				err := call(i)
				mu.Lock()
				durs = append(durs, time.Since(t))
				firstErr = cmpErr(firstErr, err)
				if err != nil {
					failed++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(durs)
		// A failed call (the API's own deadline) counts with the time it took, and is
		// reported: under load that is a result, not a reason to stop the run.
		p50, p99 = durs[len(durs)/2], durs[len(durs)*99/100]
		fmt.Printf("API %-22s p50 %8s  p99 %8s  (200 calls, 8 at a time, %d failed, load %s)\n", what,
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), failed, loadAvg())
		if firstErr != nil {
			fmt.Printf("  first failure: %v\n", firstErr)
		}
		return p50, p99
	}
	s.res.listP50, s.res.listP99 = measure("list (100 jobs a page)", func(i int) error {
		_, err := s.c.ListJobs(ctx, s.workspace(i), client.ListOptions{Limit: 100})
		return err
	})
	s.res.getP50, s.res.getP99 = measure("get/describe", func(i int) error {
		i %= s.submitted
		_, err := s.c.GetJob(ctx, s.workspace(i), jobName(i))
		return err
	})
	return nil
}

// historyPerJob reports the history length of up to 20 running jobs' workflows.
func (s *scaleRun) historyPerJob(ctx context.Context) error {
	tc, err := tclient.Dial(tclient.Options{HostPort: s.e.AppConfig(app.Config{}).TemporalAddress, Logger: nopLogger{}})
	if err != nil {
		return err
	}
	defer tc.Close()
	var lens []int64
	for i := 0; i < s.submitted; i += max(1, s.submitted/20) {
		d, err := tc.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(s.workspace(i), jobName(i)), "")
		if err != nil {
			return err
		}
		lens = append(lens, d.GetWorkflowExecutionInfo().GetHistoryLength())
	}
	slices.Sort(lens)
	s.res.historyEvents = lens[len(lens)/2]
	fmt.Printf("history events per running job (%d sampled): min %d, median %d, max %d\n", len(lens), lens[0], lens[len(lens)/2], lens[len(lens)-1])
	return s.actionsPerJob(ctx, tc)
}

// actionEvents are the history events that record an action in the sense of
// Temporal Cloud's billing (a workflow started, an activity scheduled, a timer, a
// signal, an update, a child workflow, a marker such as a version or side effect, a
// search attribute upsert). Heartbeats are actions too; they are not in the history
// and are counted from the worker's requests (the heartbeat/s column).
var actionEvents = []enumspb.EventType{
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
	enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
	enumspb.EVENT_TYPE_TIMER_STARTED,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
	enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
	enumspb.EVENT_TYPE_MARKER_RECORDED,
	enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
	enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
}

// actionsPerJob reads the whole history of up to 20 running jobs' workflows and
// prints the median count of each kind of action event and of workflow tasks.
func (s *scaleRun) actionsPerJob(ctx context.Context, tc tclient.Client) error {
	counts := map[enumspb.EventType][]int{}
	var totals []int
	for i := 0; i < s.submitted; i += max(1, s.submitted/20) {
		per := map[enumspb.EventType]int{}
		it := tc.GetWorkflowHistory(ctx, workflows.JobWorkflowID(s.workspace(i), jobName(i)), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			per[ev.GetEventType()]++
		}
		total := 0
		for _, t := range actionEvents {
			total += per[t]
			counts[t] = append(counts[t], per[t])
		}
		counts[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED] = append(counts[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED], per[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED])
		totals = append(totals, total)
	}
	median := func(v []int) int {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	var parts []string
	for _, t := range actionEvents {
		if m := median(counts[t]); m > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(t.String(), "EVENT_TYPE_"), m))
		}
	}
	s.res.actions = median(totals)
	fmt.Printf("Temporal actions per running job so far (%d sampled, heartbeats apart): median %d, max %d; medians by kind: %s; workflow tasks completed %d\n",
		len(totals), median(totals), slices.Max(totals), strings.Join(parts, ", "), median(counts[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]))
	return nil
}

// natsMessages is the number of messages ever stored in the events and logs streams.
func natsMessages(ctx context.Context, srv *devstack.NATS) (uint64, error) {
	nc, err := nats.Connect(srv.URL, srv.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, name := range []string{events.EventsStream, events.LogsStream} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return 0, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return 0, err
		}
		total += info.State.LastSeq
	}
	return total, nil
}

// nopLogger silences the Temporal client.
type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
