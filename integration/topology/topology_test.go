package topology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

const (
	ws = "topo"
	// Each of the job's 4 replicas prints linesPerReplica lines, pausing 1 s every
	// 500, so that it runs while the faults come and go.
	jobName         = "lines"
	linesPerReplica = 10000
	// The experiment: trials trials, 2 at a time, each 4 epochs of 1 s.
	experimentName = "sweep"
	trials         = 6
	// The schedule fires a one-replica job every fireEvery.
	scheduleName = "tick"
	fireEvery    = 5 * time.Second
)

var lineRE = regexp.MustCompile(`^line (\d+) of (\d+)$`)

// On the production topology (Temporal server on PostgreSQL, a 3-server NATS cluster
// with R3 streams, S3, 2 API servers, 2 workers and the notifier as processes), a
// 4-replica job, an experiment and a schedule run to completion while one NATS server,
// one worker, one API server and the notifier are killed and later restarted: the job's
// every log line arrives once, its status events are its timeline once each and each
// reached a notification rule's webhook, every trial ran one job and published its
// events once, every fire time ran one job, and no event id is in the stream twice.
func TestProductionTopologySurvivesKills(t *testing.T) {
	testStart := time.Now()
	ctx := itest.Context(t, 8*time.Minute)
	tp := startTopology(t, ctx)
	t.Logf("wall time: topology up in %s", time.Since(testStart).Round(time.Millisecond))
	js := tp.events(t)
	checkReplicated(t, ctx, js)

	a, b := tp.clients[0], tp.clients[1]
	// The notifier delivers the job's status events to a webhook.
	if _, err := b.ApplyRule(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: job-status, workspace: %s}
spec:
  match: {types: [%s], jobs: [%s]}
  webhook: {url: %q, secret: notifier-test-secret-0123}
`, ws, events.TypeJobPhase, jobName, tp.hook.srv.URL+"/hook")); err != nil {
		t.Fatalf("rule: %v", err)
	}
	workStart := time.Now()
	if _, err := a.SubmitJob(ctx, []byte(itest.JobDoc(jobName, ws, fmt.Sprintf(`
  framework: custom
  command: [sh, -c, 'i=0; while [ $i -lt %d ]; do i=$((i+1)); echo "line $i of $DLC_REPLICA"; if [ $((i %% 500)) -eq 0 ]; then sleep 1; fi; done']
  roles: {worker: {replicas: 4}}
`, linesPerReplica)))); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateExperiment(ctx, []byte(experimentDoc())); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateSchedule(ctx, []byte(scheduleDoc())); err != nil {
		t.Fatal(err)
	}

	// Kill once the job runs with lines forwarded, a trial has finished and the schedule
	// has run a job: all three are mid-way.
	testutil.Eventually(t, itest.Left(ctx), "the workloads to be mid-way", func() error {
		j, err1 := a.GetJob(ctx, ws, jobName)
		x, err2 := a.GetExperiment(ctx, ws, experimentName)
		s, err3 := a.GetSchedule(ctx, ws, scheduleName, 0)
		if err1 != nil || err2 != nil || err3 != nil {
			return errors.Join(err1, err2, err3)
		}
		last, _ := js.LastMsg(ctx, jetstream.LogsStream, events.JobLogSubject(ws, jobName, "worker", 3))
		if j.Status.Phase == schemas.JobRunning && last != nil && x.Status.Completed+x.Status.Pruned >= 1 &&
			itest.SucceededRuns(s.Status) >= 1 {
			return nil
		}
		return fmt.Errorf("job %s, experiment %d done, schedule %d succeeded", j.Status.Phase, x.Status.Completed+x.Status.Pruned, itest.SucceededRuns(s.Status))
	}, 200*time.Millisecond)
	linesBefore := countLines(t, ctx, b)

	victim := streamLeader(t, ctx, js, jetstream.LogsStream)
	killedAt := time.Now()
	kill(t, ctx, tp, victim)
	t.Logf("killed NATS server %d (leader of %s), worker 0 and API server 0 at %s, %s into the run, with %d lines forwarded",
		victim, jetstream.LogsStream, killedAt.Format(time.StampMilli), killedAt.Sub(workStart).Round(time.Millisecond), linesBefore)

	// With them down, the survivors carry on: lines keep arriving through API server 1,
	// and the schedule fires a job that runs.
	var firesBefore int
	if s, err := b.GetSchedule(ctx, ws, scheduleName, 0); err == nil {
		firesBefore = len(itest.StartedRuns(s.Status))
	}
	testutil.Eventually(t, itest.Left(ctx), "progress with one NATS server, one worker and one API server down", func() error {
		n := countLines(t, ctx, b)
		s, err := b.GetSchedule(ctx, ws, scheduleName, 0)
		if err != nil {
			return err
		}
		fires := len(itest.StartedRuns(s.Status))
		if n > linesBefore+1000 && fires > firesBefore {
			return nil
		}
		return fmt.Errorf("%d lines, %d fires", n, fires)
	}, 200*time.Millisecond)
	downFor := time.Since(killedAt)

	restartStart := time.Now()
	timed(t, fmt.Sprintf("restart NATS server %d until it rejoined", victim), func() error { return tp.nats.Restart(ctx, victim) })
	tp.startWorker(t, 0)
	tp.startNotifier(t)
	tp.startAPI(t, 0)
	timed(t, "restart API server 0 until it answered", func() error { return tp.waitAPI(ctx, 0) })
	t.Logf("wall time: down for %s, everything restarted in %s", downFor.Round(time.Millisecond), time.Since(restartStart).Round(time.Millisecond))

	// Everything finishes; the restarted API server answers for all of it.
	job := itest.WaitJob(t, ctx, a, ws, jobName, "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() })
	x := waitExperiment(t, ctx, a)
	if _, err := a.PauseSchedule(ctx, ws, scheduleName, "test over"); err != nil {
		t.Fatal(err)
	}
	var sched *api.ScheduleView
	testutil.Eventually(t, itest.Left(ctx), "the schedule's runs to finish", func() error {
		s, err := a.GetSchedule(ctx, ws, scheduleName, 0)
		if err != nil {
			return err
		}
		sched = s
		if len(s.Status.Running) == 0 {
			return nil
		}
		return fmt.Errorf("%d running", len(s.Status.Running))
	}, 200*time.Millisecond)
	t.Logf("wall time: workloads done %s after submission", time.Since(workStart).Round(time.Millisecond))

	checkJob(t, ctx, a, js, job)
	checkNotified(t, ctx, tp, js)
	checkExperiment(t, ctx, a, js, x)
	checkSchedule(t, ctx, a, sched)
	checkEventIDs(t, ctx, js)
	checkReplicasCurrent(t, ctx, js, victim)
	logFootprint(t, ctx, tp, js)
	t.Logf("wall time: whole test %s", time.Since(testStart).Round(time.Millisecond))
}

// kill takes NATS server victim, worker 0, API server 0 and the notifier away, and
// checks each is really gone: the NATS server no longer runs and its port refuses
// connections, the stream has a new leader, the processes died of SIGKILL, and the API
// port refuses.
func kill(t *testing.T, ctx context.Context, tp *topo, victim int) {
	t.Helper()
	node := tp.nats.Nodes[victim]
	if err := tp.nats.Stop(victim); err != nil {
		t.Fatal(err)
	}
	if err := tp.workers[0].kill(); err != nil {
		t.Fatal(err)
	}
	if err := tp.apis[0].kill(); err != nil {
		t.Fatal(err)
	}
	if err := tp.notifier.kill(); err != nil {
		t.Fatal(err)
	}
	if node.Server.Running() {
		t.Fatalf("NATS server %d still runs", victim)
	}
	port, _ := strconv.Atoi(tp.nats.URLs[victim][strings.LastIndex(tp.nats.URLs[victim], ":")+1:])
	if err := refused(port); err != nil {
		t.Fatalf("NATS server %d: %v", victim, err)
	}
	if err := refused(tp.apiPorts[0]); err != nil {
		t.Fatalf("API server 0: %v", err)
	}
	if err := devstack.ProbeHTTP(ctx, tp.apiURL(1)+"/healthz"); err != nil {
		t.Fatalf("API server 1: %v", err)
	}
	js := tp.events(t)
	testutil.Eventually(t, itest.Left(ctx), "a new leader of "+jetstream.LogsStream, func() error {
		l := streamLeaderOrNone(ctx, js, jetstream.LogsStream)
		if l >= 0 && l != victim {
			return nil
		}
		return fmt.Errorf("leader %d", l)
	}, 200*time.Millisecond)
}

// logFootprint logs what the run cost, for sizing (docs/production.md): the peak
// resident memory of the Temporal server and of the API server and worker that ran
// throughout, the size of PostgreSQL's data directory, and the messages and bytes of the
// event and log streams.
func logFootprint(t *testing.T, ctx context.Context, tp *topo, js *jetstream.Client) {
	t.Helper()
	t.Logf("footprint: peak memory: Temporal server %s, API server %s, worker %s; PostgreSQL data %s",
		peakMemory(tp.temporal.Pid()), peakMemory(tp.apis[1].cmd.Process.Pid), peakMemory(tp.workers[1].cmd.Process.Pid),
		mib(dirSize(filepath.Join(tp.postgres.Dir, "data"))))
	for _, name := range []string{jetstream.EventsStream, jetstream.LogsStream} {
		s, err := js.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		st := s.CachedInfo().State
		t.Logf("footprint: stream %s: %d messages, %s (per replica)", name, st.Msgs, mib(int64(st.Bytes)))
	}
}

// peakMemory is a process's peak resident memory (VmHWM), or why it is unknown.
func peakMemory(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return mib(kb << 10)
		}
	}
	return "unknown"
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// checkReplicated checks that every stream and bucket is kept on 3 servers, also after
// a process declares them without a replica count (it keeps theirs).
func checkReplicated(t *testing.T, ctx context.Context, js *jetstream.Client) {
	t.Helper()
	if err := jetstream.EnsureStreams(ctx, js.JetStream()); err != nil {
		t.Fatal(err)
	}
	names := []string{jetstream.EventsStream, jetstream.LogsStream, jetstream.AuditStream, jetstream.NotifyStream,
		jetstream.InboundStream, "KV_" + jetstream.RulesBucket, "KV_" + jetstream.TriggersBucket, "KV_" + jetstream.AuthBucket,
		"KV_" + jetstream.PipelineTemplatesBucket}
	for _, name := range names {
		s, err := js.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != replicas || info.Cluster == nil || len(info.Cluster.Replicas) != replicas-1 {
			t.Errorf("stream %s: %d replicas (cluster %+v), want %d", name, info.Config.Replicas, info.Cluster, replicas)
		}
	}
}

// checkReplicasCurrent checks that the restarted server holds a current replica of the
// event and log streams again.
func checkReplicasCurrent(t *testing.T, ctx context.Context, js *jetstream.Client, victim int) {
	t.Helper()
	for _, name := range []string{jetstream.EventsStream, jetstream.LogsStream} {
		testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("server %d to hold a current replica of %s", victim, name), func() error {
			ctx, cancel := context.WithTimeout(ctx, streamInfoTimeout)
			defer cancel()
			s, err := js.JetStream().Stream(ctx, name)
			if err != nil {
				return err
			}
			c := s.CachedInfo().Cluster
			if c == nil {
				return errors.New("no cluster info")
			}
			peers := []string{c.Leader}
			ok := true
			for _, r := range c.Replicas {
				peers = append(peers, r.Name)
				ok = ok && r.Current && !r.Offline
			}
			if ok && slices.Contains(peers, serverName(victim)) {
				return nil
			}
			return fmt.Errorf("%+v", c)
		}, 200*time.Millisecond)
	}
}

func serverName(i int) string { return "opendlc-" + strconv.Itoa(i) }

// streamInfoTimeout bounds one stream-info request of streamLeaderOrNone and
// checkReplicasCurrent.
const streamInfoTimeout = 3 * time.Second

// streamLeader is the index of the server that leads stream.
func streamLeader(t *testing.T, ctx context.Context, js *jetstream.Client, stream string) int {
	t.Helper()
	l := streamLeaderOrNone(ctx, js, stream)
	if l < 0 {
		t.Fatalf("stream %s has no leader", stream)
	}
	return l
}

// streamLeaderOrNone is the index of stream's leader, or -1 when the stream has none or
// the question gets no answer. One question waits at most streamInfoTimeout: in a
// cluster only the stream's leader answers stream info, and a follower that still
// believes in a leader just killed stays silent (nats-server's jsStreamInfoRequest), so
// under the test's own context one question could wait until the whole test is out of
// time (the likely cause of a CI run's 7.5-minute wait here).
func streamLeaderOrNone(ctx context.Context, js *jetstream.Client, stream string) int {
	ctx, cancel := context.WithTimeout(ctx, streamInfoTimeout)
	defer cancel()
	s, err := js.JetStream().Stream(ctx, stream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return -1
	}
	i, err := strconv.Atoi(strings.TrimPrefix(s.CachedInfo().Cluster.Leader, "opendlc-"))
	if err != nil {
		return -1
	}
	return i
}

// checkJob: the job succeeded; every replica's every line arrived once; its status
// events are its timeline, each once.
func checkJob(t *testing.T, ctx context.Context, c *dlc.Client, js *jetstream.Client, j *api.Job) {
	t.Helper()
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s/%s: %s", jobName, j.Status.Phase, j.Status.Reason, j.Status.Message)
	}
	seen := map[[2]int]int{}
	n := 0
	if err := c.Logs(ctx, ws, jobName, dlc.LogOptions{}, func(r events.LogRecord) error {
		m := lineRE.FindStringSubmatch(r.Line)
		if m == nil {
			return nil
		}
		i, _ := strconv.Atoi(m[1])
		rep, _ := strconv.Atoi(m[2])
		seen[[2]int{rep, i}]++
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lost, doubled := 0, 0
	var missing []string // per replica, the ranges of lines lost: where the loss lies
	for rep := range 4 {
		from := 0
		for i := 1; i <= linesPerReplica+1; i++ {
			c := seen[[2]int{rep, i}]
			if i <= linesPerReplica {
				switch {
				case c == 0:
					lost++
				case c > 1:
					doubled++
				}
			}
			switch {
			case c == 0 && i <= linesPerReplica && from == 0:
				from = i
			case (c != 0 || i > linesPerReplica) && from != 0:
				missing = append(missing, fmt.Sprintf("replica %d lines %d-%d", rep, from, i-1))
				from = 0
			}
		}
	}
	if lost != 0 || doubled != 0 || n != 4*linesPerReplica {
		t.Errorf("log lines: %d read, %d lost, %d doubled; want each of %d once; lost: %v", n, lost, doubled, 4*linesPerReplica, missing)
	}
	var timeline []string
	for _, e := range j.Status.Timeline {
		timeline = append(timeline, string(e.Phase))
	}
	var phases []string
	awaitEvents(t, ctx, "the job's status events", len(timeline), func() int {
		phases = nil
		readEvents(t, ctx, js, events.JobStatusSubject(ws, jobName), func(ev events.Event) {
			var d events.JobPhaseData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			phases = append(phases, d.Phase)
		})
		return len(phases)
	})
	if !slices.Equal(phases, timeline) {
		t.Errorf("status events %v, timeline %v: want one event per transition", phases, timeline)
	}
	t.Logf("job: %d lines from 4 replicas, each once; status events %v", n, phases)
}

// checkNotified: the notifier, SIGKILLed with the NATS server and restarted, delivered
// every status event of the job to the rule's webhook (at least once each, as webhooks
// are; the count of repeats is logged).
func checkNotified(t *testing.T, ctx context.Context, tp *topo, js *jetstream.Client) {
	t.Helper()
	var ids []string
	readEvents(t, ctx, js, events.JobStatusSubject(ws, jobName), func(ev events.Event) { ids = append(ids, ev.ID) })
	var got map[string]int
	testutil.Eventually(t, itest.Left(ctx), "the notifier's deliveries of the job's status events", func() error {
		got = map[string]int{}
		for _, ev := range tp.hook.received() {
			got[ev.ID]++
		}
		for _, id := range ids {
			if got[id] == 0 {
				return fmt.Errorf("event %s not delivered (%d of %d events delivered)", id, len(got), len(ids))
			}
		}
		return nil
	}, 200*time.Millisecond)
	repeats := 0
	for _, n := range got {
		repeats += n - 1
	}
	t.Logf("notifier: %d status events of the job delivered to the webhook, %d repeated deliveries", len(ids), repeats)
}

// checkExperiment: it succeeded with every trial, each trial ran one job, and its
// trial events (a start and an end per trial) are there once each.
func checkExperiment(t *testing.T, ctx context.Context, c *dlc.Client, js *jetstream.Client, x *api.ExperimentDetail) {
	t.Helper()
	if x.Status.Phase != schemas.ExperimentSucceeded || len(x.Status.Trials) != trials || x.Status.Failed != 0 {
		t.Fatalf("experiment: %s (%s), %d trials, %d failed", x.Status.Phase, x.Status.Message, len(x.Status.Trials), x.Status.Failed)
	}
	for _, tr := range x.Status.Trials {
		if tr.Attempts != 1 {
			t.Errorf("trial %d ran %d jobs, want 1", tr.ID, tr.Attempts)
		}
	}
	jobs := itest.ListedJobs(t, ctx, c, ws, schemas.LabelExperiment+"="+experimentName)
	if len(jobs) != trials {
		t.Errorf("%d trial jobs listed, want %d: %v", len(jobs), trials, jobs)
	}
	n := 0
	awaitEvents(t, ctx, "the trial events", 2*trials, func() int {
		n = 0
		readEvents(t, ctx, js, events.ExperimentTrialSubject(ws, experimentName), func(events.Event) { n++ })
		return n
	})
	if n != 2*trials {
		t.Errorf("%d trial events, want %d (a start and an end per trial)", n, 2*trials)
	}
	t.Logf("experiment: %d trials (%d completed, %d pruned), %d trial jobs, %d trial events", len(x.Status.Trials),
		x.Status.Completed, x.Status.Pruned, len(jobs), n)
}

// checkSchedule: every fire time from the first to the last ran once (fireEvery apart,
// none missed or skipped), and each run's job is listed once and succeeded. (Schedules
// publish no run events to NATS yet: events.ScheduleRunSubject has no publisher.)
func checkSchedule(t *testing.T, ctx context.Context, c *dlc.Client, s *api.ScheduleView) {
	t.Helper()
	runs := itest.StartedRuns(s.Status)
	var nominals []time.Time
	for _, r := range runs {
		nominals = append(nominals, r.NominalTime)
		if r.Outcome != schemas.RunSucceeded {
			t.Errorf("run %s: %s", r.Job, r.Outcome)
		}
	}
	sort.Slice(nominals, func(i, j int) bool { return nominals[i].Before(nominals[j]) })
	for i := 1; i < len(nominals); i++ {
		if d := nominals[i].Sub(nominals[i-1]); d != fireEvery {
			t.Errorf("runs at %s and %s are %s apart: a fire was lost or doubled", nominals[i-1], nominals[i], d)
		}
	}
	if s.Status.Counts.Missed != 0 || s.Status.Counts.Skipped != 0 {
		t.Errorf("counts %+v: want nothing missed or skipped", s.Status.Counts)
	}
	var listed map[string]int
	testutil.Eventually(t, itest.Left(ctx), "every scheduled job to be listed", func() error {
		listed = itest.ListedJobs(t, ctx, c, ws, schemas.LabelSchedule+"="+scheduleName)
		if len(listed) >= len(runs) {
			return nil
		}
		return fmt.Errorf("%d of %d", len(listed), len(runs))
	}, 200*time.Millisecond)
	for j, n := range listed {
		if _, ok := runs[j]; !ok || n != 1 {
			t.Errorf("job %s listed %d times (a run of the schedule: %v)", j, n, ok)
		}
	}
	if len(nominals) > 0 {
		t.Logf("schedule: %d fires from %s to %s, each once", len(nominals), nominals[0].Format(time.StampMilli),
			nominals[len(nominals)-1].Format(time.StampMilli))
	}
}

// checkEventIDs: no event id of the workspace is in the events stream twice.
func checkEventIDs(t *testing.T, ctx context.Context, js *jetstream.Client) {
	t.Helper()
	ids := map[string]int{}
	readEvents(t, ctx, js, "dlc."+ws+".>", func(ev events.Event) { ids[ev.ID]++ })
	for id, n := range ids {
		if n != 1 {
			t.Errorf("event %s is in the stream %d times", id, n)
		}
	}
	t.Logf("events: %d in %s, every id once", len(ids), jetstream.EventsStream)
}

func readEvents(t *testing.T, ctx context.Context, js *jetstream.Client, subject string, fn func(events.Event)) {
	t.Helper()
	err := js.ReadUntil(ctx, jetstream.EventsStream, subject, nil, func(_ string, data []byte) error {
		var ev events.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return err
		}
		fn(ev)
		return nil
	})
	if err != nil {
		t.Fatalf("read events on %s: %v", subject, err)
	}
}

// countLines is how many of the job's lines the API returns now.
func countLines(t *testing.T, ctx context.Context, c *dlc.Client) int {
	t.Helper()
	n := 0
	err := c.Logs(ctx, ws, jobName, dlc.LogOptions{}, func(r events.LogRecord) error {
		if lineRE.MatchString(r.Line) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Logf("logs: %v", err)
	}
	return n
}

// eventsDrainTimeout bounds how long awaitEvents waits for a workflow's outbox.
const eventsDrainTimeout = 2 * time.Minute

// awaitEvents waits until count() reaches want, or eventsDrainTimeout has passed, and
// leaves the comparison to the caller. A workflow reports its last phase as soon as it
// reaches it, while its outbox may still be retrying a publish that the killed NATS
// server or worker interrupted (backing off up to 30 s): its events are published before
// the workflow closes, not before its status says it ended.
func awaitEvents(t *testing.T, ctx context.Context, what string, want int, count func() int) {
	t.Helper()
	_ = testutil.Poll(ctx, eventsDrainTimeout, what, func() bool {
		n := count()
		if n < want {
			t.Logf("%s: %d of %d published so far", what, n, want)
		}
		return n >= want
	}, time.Second)
}

func waitExperiment(t *testing.T, ctx context.Context, c *dlc.Client) *api.ExperimentDetail {
	t.Helper()
	var x *api.ExperimentDetail
	testutil.Eventually(t, itest.Left(ctx), "the experiment to end", func() error {
		var err error
		if x, err = c.GetExperiment(ctx, ws, experimentName); err != nil {
			return err
		}
		if x.Status.Phase.Terminal() {
			return nil
		}
		return fmt.Errorf("%s, %d completed", x.Status.Phase, x.Status.Completed)
	}, 200*time.Millisecond)
	return x
}

// experimentDoc is a random search of trials trials, 2 at a time; each trial reports
// its parameter as its accuracy every second for 4 epochs.
func experimentDoc() string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace:
    - {name: x, type: float, min: 0.1, max: 0.9}
  objective: {metric: accuracy, direction: maximize, stepMetric: epoch}
  algorithm: {name: random, seed: 7}
  maxTrials: %d
  parallelism: 2
  trialTemplate:
    framework: custom
    command: [sh, -c, 'for e in 1 2 3 4; do sleep 1; echo "dlc:metric epoch=$e accuracy=$0"; done']
    args: ["${params.x}"]
    roles: {worker: {replicas: 1}}
`, experimentName, ws, trials)
}

// scheduleDoc fires a one-replica job every fireEvery, each fire on its own.
func scheduleDoc() string {
	return fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Schedule
metadata: {name: %s, workspace: %s}
spec:
  cron: "@every %s"
  overlapPolicy: allowAll
  catchupWindow: 1m
  action:
    jobTemplate:
      spec:
        framework: custom
        command: [sh, -c, 'echo "run $DLC_JOB"']
        roles: {worker: {replicas: 1}}
`, scheduleName, ws, fireEvery)
}
