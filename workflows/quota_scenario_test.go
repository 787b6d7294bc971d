package workflows_test

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/workers"
	"github.com/opendlc/opendlc/workflows"
)

// The fair-sharing scenario benchmark (docs/quota-benchmark.md): three teams share a
// 24-GPU cluster, each with a nominal quota of 8 GPUs, and submit bursts of jobs.
// Admission is the real quota workflow (QuotaWorkflow and its ledger) under Temporal's
// time-skipping test environment; the jobs are simulated by the driver below: a job
// asks with the "request" update, runs for its duration once told it is granted (by
// the update's answer or the quota-decision signal), then releases; a job told it is
// preempted stops after a grace period, releases, and asks again with a new update id,
// as the job workflow does (training_job_quota.go), and resumes where it stopped.
//
// Without -fairshare.report the test runs a short scenario and the full one (about four
// simulated hours, a second of real time) and checks correctness only. With it, it runs
// the full scenario in each configuration and prints the tables and the share
// timelines:
//
//	go test ./workflows -run TestFairShareScenario -v -fairshare.report
var fairshareReport = flag.Bool("fairshare.report", false, "TestFairShareScenario: run the full fair-sharing scenario and print its report")

// fsTeam is one team: its workspace, nominal GPU quota and fair-sharing weight.
type fsTeam struct {
	Name    string
	Nominal int64
	Weight  int64
}

// fsWave is a series of Count jobs of one team: the first arrives at At, the next
// Every later (0: all at once); job i asks for GPUs[i%len] and runs Run[i%len].
type fsWave struct {
	Team  string
	At    time.Duration
	Every time.Duration
	Count int
	GPUs  []int64
	Run   []time.Duration
}

// fsScenario is a cluster, its teams and the arrivals of their jobs.
type fsScenario struct {
	Name    string
	Cluster int64
	Teams   []fsTeam
	Waves   []fsWave
	// Grace is how long a preempted job takes to stop and release.
	Grace time.Duration
	// Limit bounds the simulated time: the run fails if jobs are left by then.
	Limit time.Duration
}

func mins(m ...int) []time.Duration {
	out := make([]time.Duration, len(m))
	for i, v := range m {
		out[i] = time.Duration(v) * time.Minute
	}
	return out
}

func teams(weights ...int64) []fsTeam {
	return []fsTeam{{"team-a", 8, weights[0]}, {"team-b", 8, weights[1]}, {"team-c", 8, weights[2]}}
}

// fullScenario: A bursts at 0 and again at 2 h, B at 30 min and 2 h 20, C submits small
// jobs steadily from 1 h. A's first burst outlasts B's arrival, so that A and B both
// want more than their nominal quota for a while, and the freed GPUs are shared by
// the fair-sharing order.
func fullScenario(weights ...int64) fsScenario {
	return fsScenario{
		Name: "full", Cluster: 24, Teams: teams(weights...), Grace: 30 * time.Second, Limit: 12 * time.Hour,
		Waves: []fsWave{
			{Team: "team-a", At: 0, Count: 16, GPUs: []int64{2}, Run: mins(20)},
			{Team: "team-a", At: 0, Count: 6, GPUs: []int64{4}, Run: mins(30)},
			{Team: "team-b", At: 30 * time.Minute, Count: 10, GPUs: []int64{4}, Run: mins(25)},
			{Team: "team-b", At: 30 * time.Minute, Count: 4, GPUs: []int64{1}, Run: mins(25)},
			{Team: "team-c", At: 60 * time.Minute, Every: 5 * time.Minute, Count: 30, GPUs: []int64{1, 2, 1, 4}, Run: mins(15)},
			{Team: "team-a", At: 120 * time.Minute, Count: 8, GPUs: []int64{4}, Run: mins(20)},
			{Team: "team-b", At: 140 * time.Minute, Count: 12, GPUs: []int64{2}, Run: mins(15)},
		},
	}
}

// shortScenario is the same shape, smaller: A borrows, B and C reclaim.
func shortScenario() fsScenario {
	return fsScenario{
		Name: "short", Cluster: 24, Teams: teams(1, 1, 1), Grace: 30 * time.Second, Limit: 6 * time.Hour,
		Waves: []fsWave{
			{Team: "team-a", At: 0, Count: 8, GPUs: []int64{2, 4}, Run: mins(10)},
			{Team: "team-b", At: 5 * time.Minute, Count: 4, GPUs: []int64{4, 2}, Run: mins(8)},
			{Team: "team-c", At: 8 * time.Minute, Every: 3 * time.Minute, Count: 5, GPUs: []int64{1, 2, 4}, Run: mins(6)},
		},
	}
}

// fsJob is a simulated job.
type fsJob struct {
	id, team string
	gpus     int64
	arrive   time.Duration
	run      time.Duration // work left
	state    fsState
	asks     int       // requests sent
	askedAt  time.Time // the current request
	seq      int       // the driver's order of requests (queue order: priorities are equal)
	started  time.Time // running since
	stopAt   time.Time // evicting: releases then
	wait     time.Duration
	grants   int
	releases int
	preempts int
	needless int  // preemptions of a job whose team did not borrow once its stopping jobs were gone
	noticed  bool // a preemption notice came before the grant was seen
	doneAt   time.Time
	// headSince: since when the job has been its team's queue head within the team's
	// nominal quota while another team used more than its nominal quota (zero: not).
	headSince time.Time
	late      bool // reported waiting too long at the head
}

type fsState int

const (
	fsPending  fsState = iota // not arrived
	fsQueued                  // asked, not granted
	fsRunning                 // granted
	fsEvicting                // told it is preempted, stopping
	fsReask                   // released after a preemption, asks at the next step
	fsDone
)

func (s fsState) String() string {
	return [...]string{"pending", "queued", "running", "evicting", "re-asking", "done"}[s]
}

// fsEvent is what the quota workflow told a job, as the driver received it.
type fsEvent struct {
	at      time.Time
	job     string
	granted bool   // the update's answer or a quota-decision signal granted it
	preempt bool   // a preemption notice
	queued  bool   // the update's answer queued it (nothing changes)
	err     string // an answer a job of the scenario must never get
}

// fsSample is one team's figures at one simulated second.
type fsSample struct {
	used, queued int64 // GPUs held (running or stopping), GPUs asked for and waiting
	smallest     int64 // the smallest waiting job's GPUs (0: none waits)
}

// fsRun is the outcome of one quota workflow's run under the driver.
type fsRun struct {
	samples  [][]fsSample // by second, by team (the run's teams)
	jobs     []*fsJob
	makespan time.Duration
	errs     []string
}

// fsTick is how often the driver looks at its jobs (simulated time).
const fsTick = time.Second

var fsStart = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

// jobsOf lists the scenario's jobs of the given teams, in arrival order.
func (s fsScenario) jobsOf(names []string) []*fsJob {
	var jobs []*fsJob
	n := map[string]int{}
	for _, w := range s.Waves {
		if !slices.Contains(names, w.Team) {
			continue
		}
		for i := range w.Count {
			n[w.Team]++
			jobs = append(jobs, &fsJob{
				id: fmt.Sprintf("dlc/%s/job/%s-%03d", w.Team, strings.TrimPrefix(w.Team, "team-"), n[w.Team]), team: w.Team,
				gpus: w.GPUs[i%len(w.GPUs)], run: w.Run[i%len(w.Run)], arrive: w.At + time.Duration(i)*w.Every,
			})
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].arrive < jobs[j].arrive })
	return jobs
}

// runQuota drives one quota workflow: the cohort of all the scenario's teams
// (cohort), or one team's own workspace quota. Scenario time 0 is one minute after the
// workflow starts (the cohort's members are signalled in that minute).
func runQuota(s fsScenario, tm []fsTeam, cohort bool) fsRun {
	var ws testsuite.WorkflowTestSuite
	ws.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := ws.NewTestWorkflowEnvironment()
	workers.RegisterWorkflows(env)
	workers.RegisterQuotaActivities(env, &activities.QuotaActivities{})
	returnActivity(env, quotaActs.ClosedJobs, []string{}, nil) // the simulated jobs never close on their own
	env.SetStartTime(fsStart.Add(-time.Minute))

	var mu sync.Mutex
	var inbox []fsEvent
	post := func(e fsEvent) {
		mu.Lock()
		inbox = append(inbox, e)
		mu.Unlock()
	}
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalQuotaDecision, mock.Anything).Return(
		func(_, id, _, _ string, arg any) error {
			d, _ := arg.(workflows.QuotaDecision)
			e := fsEvent{at: env.Now(), job: id, granted: d.Granted}
			if !d.Granted {
				e.err = fmt.Sprintf("quota-decision signal not granting: %+v", d)
			}
			post(e)
			return nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalQuotaPreempt, mock.Anything).Return(
		func(_, id, _, _ string, _ any) error {
			post(fsEvent{at: env.Now(), job: id, preempt: true})
			return nil
		})

	names := make([]string, len(tm))
	nominal := map[string]int64{}
	for i, team := range tm {
		names[i] = team.Name
		nominal[team.Name] = team.Nominal
	}
	jobs := s.jobsOf(names)
	byID := map[string]*fsJob{}
	for _, j := range jobs {
		byID[j.id] = j
	}
	out := fsRun{jobs: jobs}
	fail := func(format string, args ...any) { out.errs = append(out.errs, fmt.Sprintf(format, args...)) }
	seq := 0

	ask := func(j *fsJob, now time.Time) {
		updateID := j.id + ":quota"
		if j.asks > 0 {
			updateID = fmt.Sprintf("%s:quota:%d", j.id, j.asks)
		}
		j.asks++
		seq++
		j.state, j.askedAt, j.seq = fsQueued, now, seq
		env.UpdateWorkflow(workflows.UpdateQuotaRequest, updateID, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { post(fsEvent{at: env.Now(), job: j.id, err: "request rejected: " + err.Error()}) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				d, _ := v.(workflows.QuotaDecision)
				switch {
				case err != nil:
					post(fsEvent{at: env.Now(), job: j.id, err: "request failed: " + err.Error()})
				case d.Rejected || d.Ledger != "":
					post(fsEvent{at: env.Now(), job: j.id, err: fmt.Sprintf("request answered %+v", d)})
				case d.Granted:
					post(fsEvent{at: env.Now(), job: j.id, granted: true})
				default:
					post(fsEvent{at: env.Now(), job: j.id, queued: true})
				}
			},
		}, workflows.QuotaRequest{JobID: j.id, Resources: activities.QuotaAmounts{GPU: j.gpus}, Workspace: j.team})
	}
	release := func(j *fsJob) {
		j.releases++
		env.SignalWorkflow(workflows.SignalQuotaRelease, workflows.QuotaRelease{JobID: j.id})
	}
	grant := func(j *fsJob, at time.Time) {
		switch j.state {
		case fsQueued:
			j.grants++
			j.wait += at.Sub(j.askedAt)
			j.state, j.started = fsRunning, at
			if j.noticed { // preempted before the driver saw the grant
				j.noticed = false
				j.preempts++
				j.state, j.stopAt = fsEvicting, at.Add(s.Grace)
			}
		default:
			fail("%s told it is granted while %v", j.id, j.state)
		}
	}
	preempt := func(j *fsJob, at time.Time) {
		switch j.state {
		case fsRunning:
			j.preempts++
			// Needless: the victim's team, its jobs already stopping set aside, borrows
			// nothing: taking this job takes the team below its nominal quota, where
			// nothing of it is left to reclaim.
			var keeps int64
			for _, k := range jobs {
				if k.team == j.team && k.state == fsRunning {
					keeps += k.gpus
				}
			}
			if keeps <= nominal[j.team] {
				j.needless++
			}
			j.run -= at.Sub(j.started) // it resumes where it stopped
			j.state, j.stopAt = fsEvicting, at.Add(s.Grace)
		case fsQueued:
			j.noticed = true
		default:
			fail("%s told it is preempted while %v", j.id, j.state)
		}
	}

	use := func() map[string]int64 {
		u := map[string]int64{}
		for _, j := range jobs {
			if j.state == fsRunning || j.state == fsEvicting {
				u[j.team] += j.gpus
			}
		}
		return u
	}
	var end time.Time
	var step func()
	step = func() {
		now := env.Now()
		mu.Lock()
		events := inbox
		inbox = nil
		mu.Unlock()
		// In time order; at one time, grants first, then the notices in the order the
		// ledger chooses victims (most recently admitted first), so that needless
		// preemptions are counted the same way every run.
		sort.SliceStable(events, func(a, b int) bool {
			ea, eb := events[a], events[b]
			switch {
			case !ea.at.Equal(eb.at):
				return ea.at.Before(eb.at)
			case ea.preempt != eb.preempt:
				return eb.preempt
			case ea.preempt && byID[ea.job] != nil && byID[eb.job] != nil && !byID[ea.job].started.Equal(byID[eb.job].started):
				return byID[ea.job].started.After(byID[eb.job].started)
			}
			return ea.job > eb.job
		})
		for _, e := range events {
			j := byID[e.job]
			switch {
			case j == nil:
				fail("the quota told an unknown job %s", e.job)
			case e.err != "":
				fail("%s: %s", e.job, e.err)
			case e.granted:
				grant(j, e.at)
			case e.preempt:
				preempt(j, e.at)
			}
		}
		// Reclaim: the head of a team's queue within the team's nominal quota, while
		// another team uses more than its own, is granted within the grace and a
		// minute (one admission pass after the victims release, and the driver's step).
		u := use()
		for _, team := range tm {
			var head *fsJob
			for _, j := range jobs {
				if j.team == team.Name && j.state == fsQueued && (head == nil || j.seq < head.seq) {
					head = j
				}
			}
			for _, j := range jobs {
				if j.team == team.Name && j != head {
					j.headSince = time.Time{}
				}
			}
			if head == nil {
				continue
			}
			others := false
			for _, o := range tm {
				others = others || (o.Name != team.Name && u[o.Name] > o.Nominal)
			}
			if !cohort || !others || u[team.Name]+head.gpus > team.Nominal {
				head.headSince = time.Time{}
				continue
			}
			if head.headSince.IsZero() {
				head.headSince = now
			}
			if d := now.Sub(head.headSince); d > s.Grace+time.Minute && !head.late {
				head.late = true
				fail("%s waited %v at the head of %s's queue within its nominal quota while another team borrowed", head.id, d, team.Name)
			}
		}
		// Sample every step the second that ends now: what the jobs held and waited
		// for after the previous step's actions and the quota's answers to them.
		if since := now.Sub(fsStart) - fsTick; since >= 0 {
			row := make([]fsSample, len(tm))
			var total int64
			for i, team := range tm {
				row[i].used = u[team.Name]
				total += u[team.Name]
				for _, j := range jobs {
					if j.team == team.Name && (j.state == fsQueued || j.state == fsReask) {
						row[i].queued += j.gpus
						if row[i].smallest == 0 || j.gpus < row[i].smallest {
							row[i].smallest = j.gpus
						}
					}
				}
				if !cohort && u[team.Name] > team.Nominal {
					fail("at %v: %s uses %d GPUs, its own quota is %d", since, team.Name, u[team.Name], team.Nominal)
				}
			}
			if total > s.Cluster {
				fail("at %v: %d GPUs in use, the cluster has %d", since, total, s.Cluster)
			}
			out.samples = append(out.samples, row)
			// Every minute: the workflow's own count agrees that the cluster is not
			// oversubscribed, and counts at least what the jobs hold.
			if since%time.Minute == 0 {
				if v, err := env.QueryWorkflow(workflows.QueryQuota); err != nil {
					fail("query: %v", err)
				} else {
					var view workflows.QuotaView
					if err := v.Get(&view); err != nil {
						fail("query: %v", err)
					}
					used := view.Used.GPU
					for _, m := range view.Members {
						used += m.Used.GPU
					}
					if used > s.Cluster || used < total {
						fail("at %v: the quota counts %d GPUs in use, the jobs hold %d (cluster %d)", since, used, total, s.Cluster)
					}
				}
			}
		}
		// Jobs finish, stop, ask again, arrive.
		for _, j := range jobs {
			switch {
			case j.state == fsRunning && !now.Before(j.started.Add(j.run)):
				release(j)
				j.state, j.doneAt = fsDone, now
			case j.state == fsEvicting && !now.Before(j.stopAt):
				release(j)
				j.state = fsReask
			case j.state == fsReask:
				ask(j, now) // released at the previous step, as the job waits for its release signal to be delivered
			case j.state == fsPending && !now.Before(fsStart.Add(j.arrive)):
				ask(j, now)
			}
		}
		done := true
		for _, j := range jobs {
			done = done && j.state == fsDone
		}
		if done || now.Sub(fsStart) >= s.Limit || len(out.errs) > 20 {
			if !done {
				fail("jobs left after %v", s.Limit)
			}
			end = now
			env.CancelWorkflow()
			return
		}
		env.RegisterDelayedCallback(step, fsTick)
	}

	if cohort {
		env.RegisterDelayedCallback(func() {
			for _, team := range tm {
				env.SignalWorkflow(workflows.SignalQuotaMember, workflows.QuotaMemberSet{Workspace: team.Name,
					Limits: workflows.QuotaLimits{GPU: int64p(team.Nominal), Cohort: "fair", Weight: team.Weight}})
			}
		}, time.Second)
	}
	env.RegisterDelayedCallback(step, time.Minute)
	state := workflows.QuotaView{Cohort: "fair"}
	if !cohort {
		state = workflows.QuotaView{Workspace: tm[0].Name, Limits: workflows.QuotaLimits{GPU: int64p(tm[0].Nominal)}}
	}
	env.ExecuteWorkflow(workflows.QuotaWorkflowName, state)
	for _, j := range jobs {
		if j.grants != j.releases || j.grants < 1 || j.state != fsDone {
			fail("%s: granted %d times, released %d times, state %v", j.id, j.grants, j.releases, j.state)
		}
		if j.grants != j.preempts+1 {
			fail("%s: granted %d times, preempted %d times", j.id, j.grants, j.preempts)
		}
		if !end.IsZero() {
			out.makespan = max(out.makespan, j.doneAt.Sub(fsStart))
		}
	}
	return out
}

// fsConfig is a configuration's run: its samples over all teams and its jobs.
type fsConfig struct {
	name     string
	teams    []fsTeam
	samples  [][]fsSample // by second, by team (s.Teams order)
	jobs     []*fsJob
	makespan time.Duration
}

// runConfig runs the scenario as a cohort, or with one independent workspace quota
// per team (one quota workflow each, on the same arrivals).
func runConfig(t *testing.T, s fsScenario, cohort bool) fsConfig {
	name := "cohort"
	if !cohort {
		name = "independent"
	}
	if cohort && (s.Teams[0].Weight != s.Teams[1].Weight || s.Teams[0].Weight != s.Teams[2].Weight) {
		var w []string
		for _, tm := range s.Teams {
			w = append(w, strconv.FormatInt(max(tm.Weight, 1), 10))
		}
		name += " " + strings.Join(w, ":")
	}
	c := fsConfig{name: name, teams: s.Teams}
	var runs []fsRun
	if cohort {
		runs = append(runs, runQuota(s, s.Teams, true))
	} else {
		for _, tm := range s.Teams {
			runs = append(runs, runQuota(s, []fsTeam{tm}, false))
		}
	}
	seconds := 0
	for _, r := range runs {
		for _, e := range r.errs {
			t.Errorf("%s %s: %s", s.Name, name, e)
		}
		seconds = max(seconds, len(r.samples))
		c.jobs = append(c.jobs, r.jobs...)
		c.makespan = max(c.makespan, r.makespan)
	}
	c.samples = make([][]fsSample, seconds)
	for m := range c.samples {
		c.samples[m] = make([]fsSample, len(s.Teams))
		col := 0
		for _, r := range runs {
			for i := range len(r.samples[0]) {
				if m < len(r.samples) {
					c.samples[m][col+i] = r.samples[m][i]
				}
			}
			col += len(r.samples[0])
		}
	}
	return c
}

// fairShares is the ideal allocation of capacity over teams with the given demand,
// nominal quota and weight: each team first gets min(demand, nominal), its guaranteed
// part; what is left of the capacity is shared by weighted water-filling (weighted
// max-min fairness) over the demand left: every team still wanting more gets the
// same amount per unit of weight, except those that want less, which get what they
// want. The result is fractional; it sums to min(capacity, total demand) when the
// nominal quotas fit the capacity.
func fairShares(capacity float64, demand, nominal, weight []float64) []float64 {
	share := make([]float64, len(demand))
	want := make([]float64, len(demand))
	left := capacity
	for i := range demand {
		share[i] = min(demand[i], nominal[i])
		want[i] = demand[i] - share[i]
		left -= share[i]
	}
	active := []int{}
	for i := range want {
		if want[i] > 0 {
			active = append(active, i)
		}
	}
	for left > 1e-9 && len(active) > 0 {
		var w float64
		for _, i := range active {
			w += weight[i]
		}
		level := left / w // per unit of weight
		var still []int
		for _, i := range active {
			if want[i] <= level*weight[i] {
				share[i] += want[i]
				left -= want[i]
				want[i] = 0
			} else {
				still = append(still, i)
			}
		}
		if len(still) == len(active) { // nobody is satisfied: all get the level
			for _, i := range active {
				share[i] += level * weight[i]
			}
			break
		}
		active = still
	}
	return share
}

func TestFairSharesWaterFilling(t *testing.T) {
	for _, tc := range []struct {
		demand, weight, want []float64
	}{
		{[]float64{40, 0, 0}, []float64{1, 1, 1}, []float64{24, 0, 0}},
		{[]float64{40, 36, 0}, []float64{1, 1, 1}, []float64{12, 12, 0}},
		{[]float64{40, 36, 4}, []float64{1, 1, 1}, []float64{10, 10, 4}},
		{[]float64{40, 10, 4}, []float64{1, 1, 1}, []float64{10, 10, 4}},
		{[]float64{40, 36, 4}, []float64{2, 1, 1}, []float64{10 + 2.0/3, 9 + 1.0/3, 4}},
		{[]float64{40, 36, 0}, []float64{2, 1, 1}, []float64{13 + 1.0/3, 10 + 2.0/3, 0}},
		{[]float64{5, 6, 7}, []float64{1, 1, 1}, []float64{5, 6, 7}},
		{[]float64{30, 30, 30}, []float64{3, 1, 1}, []float64{8, 8, 8}},
	} {
		got := fairShares(24, tc.demand, []float64{8, 8, 8}, tc.weight)
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-9 {
				t.Errorf("demand %v weights %v: %v, want %v", tc.demand, tc.weight, got, tc.want)
				break
			}
		}
	}
}

// fsFigures are a configuration's report figures, integrated over the samples (one a
// simulated second).
type fsFigures struct {
	// idleQueued: GPU-minutes idle while some job waited; idleFit: of them, those while
	// some waiting job asked for no more GPUs than were idle.
	idleQueued, idleFit float64
	ideal               [][]float64 // by second, by team
	team                []fsTeamFigures
}

type fsTeamFigures struct {
	mad, meanWait, maxWait float64 // GPUs; minutes
	preemptions, needless  int
	jobs                   int
	gpuMinutes             float64
}

func (c fsConfig) figures(s fsScenario) fsFigures {
	f := fsFigures{team: make([]fsTeamFigures, len(c.teams))}
	nominal, weight := make([]float64, len(c.teams)), make([]float64, len(c.teams))
	for i, tm := range c.teams {
		nominal[i], weight[i] = float64(tm.Nominal), float64(max(tm.Weight, 1))
	}
	perSample := fsTick.Minutes()
	for _, row := range c.samples {
		demand := make([]float64, len(row))
		var used, queued, smallest int64
		for i, smp := range row {
			if smp.smallest > 0 && (smallest == 0 || smp.smallest < smallest) {
				smallest = smp.smallest
			}
			demand[i] = float64(smp.used + smp.queued)
			used += smp.used
			queued += smp.queued
			f.team[i].gpuMinutes += float64(smp.used) * perSample
		}
		ideal := fairShares(float64(s.Cluster), demand, nominal, weight)
		f.ideal = append(f.ideal, ideal)
		for i, smp := range row {
			f.team[i].mad += math.Abs(float64(smp.used) - ideal[i])
		}
		if idle := s.Cluster - used; queued > 0 && idle > 0 {
			f.idleQueued += float64(idle) * perSample
			if smallest <= idle {
				f.idleFit += float64(idle) * perSample
			}
		}
	}
	for i, tm := range c.teams {
		if n := len(c.samples); n > 0 {
			f.team[i].mad /= float64(n)
		}
		for _, j := range c.jobs {
			if j.team != tm.Name {
				continue
			}
			f.team[i].jobs++
			f.team[i].preemptions += j.preempts
			f.team[i].needless += j.needless
			w := j.wait.Minutes()
			f.team[i].meanWait += w
			f.team[i].maxWait = max(f.team[i].maxWait, w)
		}
		if f.team[i].jobs > 0 {
			f.team[i].meanWait /= float64(f.team[i].jobs)
		}
	}
	return f
}

// fsReport prints the configurations' tables and share timelines.
func fsReport(s fsScenario, configs []fsConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario %q: %d GPUs. Admission: the real quota workflow (Temporal's test environment, time-skipping); job run times: simulated by the test driver.\n\n", s.Name, s.Cluster)
	fmt.Fprintf(&b, "| configuration | makespan (min) | GPU·min idle while a job waited | of which a waiting job would have fit |\n|---|---:|---:|---:|\n")
	figs := make([]fsFigures, len(configs))
	for k, c := range configs {
		figs[k] = c.figures(s)
		fmt.Fprintf(&b, "| %s | %.1f | %.0f | %.0f |\n", c.name, c.makespan.Minutes(), figs[k].idleQueued, figs[k].idleFit)
	}
	fmt.Fprintf(&b, "\n| configuration | team | jobs | GPU·min | mean \\|use − ideal\\| (GPUs) | mean wait (min) | max wait (min) | preemptions | of which needless |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for k, c := range configs {
		for i, tm := range c.teams {
			tf := figs[k].team[i]
			fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %.2f | %.1f | %.1f | %d | %d |\n", c.name, tm.Name, tf.jobs, tf.gpuMinutes, tf.mad, tf.meanWait, tf.maxWait, tf.preemptions, tf.needless)
		}
	}
	perMinute := int(time.Minute / fsTick)
	for k, c := range configs {
		fmt.Fprintf(&b, "\nTimeline, %s: each team's GPUs in use / ideal fair share [GPUs waiting], averaged over the minute starting at t\n\n", c.name)
		fmt.Fprintf(&b, "| t (min) |")
		for _, tm := range c.teams {
			fmt.Fprintf(&b, " %s |", tm.Name)
		}
		fmt.Fprintf(&b, " idle |\n|---:|")
		for range c.teams {
			fmt.Fprintf(&b, "---:|")
		}
		fmt.Fprintf(&b, "---:|\n")
		for m := 0; m*perMinute < len(c.samples); m += 10 {
			rows := c.samples[m*perMinute : min(len(c.samples), (m+1)*perMinute)]
			n := float64(len(rows))
			fmt.Fprintf(&b, "| %d |", m)
			var idle float64
			for i := range c.teams {
				var used, queued, ideal float64
				for r, row := range rows {
					used += float64(row[i].used)
					queued += float64(row[i].queued)
					ideal += figs[k].ideal[m*perMinute+r][i]
				}
				idle += used
				fmt.Fprintf(&b, " %.1f / %.1f [%.1f] |", used/n, ideal/n, queued/n)
			}
			fmt.Fprintf(&b, " %.1f |\n", float64(s.Cluster)-idle/n)
		}
	}
	return b.String()
}

// The fair-sharing scenario (see fsScenario and docs/quota-benchmark.md). Without
// -fairshare.report it runs the short and the full scenario (together about a second),
// with it the full one only, and prints the report; each as a cohort and as
// independent workspace quotas (and, with the flag, the full one also as a cohort of
// weights 2:1:1), checking in each run that every job is granted and released once per
// admission and ends, that the cluster is never oversubscribed (by the jobs' count
// and by the quota's), that an independent workspace never exceeds its quota, and
// that a team's head job within its nominal quota reclaims borrowed GPUs within the
// grace period and a minute. Nothing is asserted about the figures themselves (they
// are measurements), except that the cohort runs borrow and reclaim at all.
func TestFairShareScenario(t *testing.T) {
	scenarios := []fsScenario{shortScenario(), fullScenario(1, 1, 1)}
	if *fairshareReport {
		scenarios = scenarios[1:]
	}
	for _, s := range scenarios {
		configs := []fsConfig{runConfig(t, s, true), runConfig(t, s, false)}
		if *fairshareReport {
			configs = append(configs, runConfig(t, fullScenario(2, 1, 1), true))
		}
		for _, c := range configs {
			if !strings.HasPrefix(c.name, "cohort") {
				continue
			}
			// The cohort runs exercise borrowing and reclaim.
			borrowed, preempted := false, 0
			for _, row := range c.samples {
				for i, smp := range row {
					borrowed = borrowed || smp.used > c.teams[i].Nominal
				}
			}
			for _, j := range c.jobs {
				preempted += j.preempts
			}
			if !borrowed || preempted == 0 {
				t.Errorf("%s %s: no team borrowed (%v) or nothing was reclaimed (%d preemptions)", s.Name, c.name, borrowed, preempted)
			}
		}
		if *fairshareReport || testing.Verbose() {
			t.Log("\n" + fsReport(s, configs))
		}
	}
}
