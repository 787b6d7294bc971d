package activities

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
)

// Heartbeat pacing of the activities that last as long as a job (WatchGang and
// ForwardLogs). Each heartbeat is one RPC to the Temporal frontend, and the SDK sends
// one per activity per throttle interval (workers.Main sets it to 1 s so that a
// cancellation is seen within a second). At a thousand running jobs that is two
// thousand RPCs a second for nothing but liveness. The pacer spreads a per-process
// budget over the long activities running in the process: while they are fewer than
// the budget each heartbeats every second as before; past it, each heartbeats every
// active/budget seconds, so the process's heartbeat rate stays at the budget. The
// interval is capped at a third of the activity's heartbeat timeout, so a heartbeat
// is never late, and that cap is what bounds it past budget*timeout/3 activities.
// The price is latency: a cancellation (dlc job stop) reaches a watch at its next
// heartbeat, so with 1,000 jobs on one worker a stop waits up to the interval.

// DefaultHeartbeatBudget is the heartbeats per second a worker process spends on its
// long activities when JobActivities.HeartbeatBudget is zero.
const DefaultHeartbeatBudget = 100

// minHeartbeatEvery is the shortest interval between two heartbeats of one activity:
// the worker's MaxHeartbeatThrottleInterval, below which the SDK batches anyway.
const minHeartbeatEvery = time.Second

// longActivities counts the paced activities running in this process.
var longActivities atomic.Int64

// heartbeatPacer decides when one long activity heartbeats next.
type heartbeatPacer struct {
	budget float64
	cap    time.Duration // a third of the heartbeat timeout; 0: none
	next   time.Time
}

// pace registers a long activity with the process's pacer; call done when it ends.
func (a *JobActivities) pace(ctx context.Context) (p *heartbeatPacer, done func()) {
	longActivities.Add(1)
	p = &heartbeatPacer{budget: a.HeartbeatBudget}
	if p.budget <= 0 {
		p.budget = DefaultHeartbeatBudget
	}
	if activity.IsActivity(ctx) {
		p.cap = activity.GetInfo(ctx).HeartbeatTimeout / 3
	}
	return p, func() { longActivities.Add(-1) }
}

// every is the interval between this activity's heartbeats while active long
// activities run in the process.
func (p *heartbeatPacer) every(active int64) time.Duration {
	iv := time.Duration(float64(active) / p.budget * float64(time.Second))
	iv = max(iv, minHeartbeatEvery)
	if p.cap > 0 {
		iv = min(iv, max(p.cap, minHeartbeatEvery))
	}
	return iv
}

// due reports whether it is time to heartbeat, and if so schedules the next one.
func (p *heartbeatPacer) due(now time.Time) bool {
	if now.Before(p.next) {
		return false
	}
	p.schedule(now, longActivities.Load())
	return true
}

// schedule sets the next heartbeat one interval after now, jittered by up to 5 % either
// way so that activities started together do not heartbeat together. The jitter's mean
// is zero, so the process's rate is its budget (a jitter that only shortened, by up to
// 10 %, made it 5 % over); it never passes the cap, where the rate is the cap's, not
// the budget's.
func (p *heartbeatPacer) schedule(now time.Time, active int64) {
	iv := p.every(active)
	next := iv - iv/20 + time.Duration(rand.Int64N(int64(iv)/10+1))
	if p.cap > 0 {
		next = min(next, max(p.cap, minHeartbeatEvery))
	}
	p.next = now.Add(next)
}

// wait is how long until the next heartbeat is due (at least a millisecond).
func (p *heartbeatPacer) wait(now time.Time) time.Duration {
	return max(p.next.Sub(now), time.Millisecond)
}
