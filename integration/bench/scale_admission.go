package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// admissionTrace records when each job's submission started and answered, so that
// the time from submit to Launching can be split into its steps (admissionSteps).
type admissionTrace struct {
	mu          sync.Mutex
	submitStart map[int]time.Time
	submitEnd   map[int]time.Time
}

func newAdmissionTrace() *admissionTrace {
	return &admissionTrace{submitStart: map[int]time.Time{}, submitEnd: map[int]time.Time{}}
}

// submitted records job i's submit call, from start to its answer.
func (t *admissionTrace) submitted(i int, start, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.submitStart[i], t.submitEnd[i] = start, end
}

// admissionSteps reads every job from from to to-1 and prints the admission rate
// from the jobs' own timelines (first submit to the last job's Launching entry, so the
// bench's polling interval does not count) and the percentiles of each step of their
// admission:
//
//   - submit: the API's submit call (validation, the workflow start);
//   - answer -> accepted: from the submit's answer to the job workflow's first
//     workflow task (the Pending "Accepted" entry: task dispatch to the worker);
//   - accepted -> admitted: the workspace lookup and the quota workflow's answer
//     (the Admitted condition);
//   - admitted -> launching: planning the attempt, up to the Launching entry.
func (s *scaleRun) admissionSteps(ctx context.Context, from, to int) (jobsPerSec float64) {
	order := []string{"submit (API call)", "answer -> accepted", "accepted -> admitted", "admitted -> launching", "submit -> launching"}
	var mu sync.Mutex
	steps := map[string][]time.Duration{}
	var first, last time.Time
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			j, err := s.c.GetJob(ctx, s.workspace(i), jobName(i))
			if err != nil {
				return
			}
			s.trace.mu.Lock()
			start, end := s.trace.submitStart[i], s.trace.submitEnd[i]
			s.trace.mu.Unlock()
			accepted := timelineAt(j.Status.Timeline, schemas.JobPending)
			launching := timelineAt(j.Status.Timeline, schemas.JobLaunching)
			var admitted time.Time
			for _, c := range j.Status.Conditions {
				if c.Type == schemas.ConditionAdmitted {
					admitted = c.LastTransitionTime
				}
			}
			if start.IsZero() || accepted.IsZero() || admitted.IsZero() || launching.IsZero() {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first.IsZero() || start.Before(first) {
				first = start
			}
			if launching.After(last) {
				last = launching
			}
			steps[order[0]] = append(steps[order[0]], end.Sub(start))
			steps[order[1]] = append(steps[order[1]], accepted.Sub(end))
			steps[order[2]] = append(steps[order[2]], admitted.Sub(accepted))
			steps[order[3]] = append(steps[order[3]], launching.Sub(admitted))
			steps[order[4]] = append(steps[order[4]], launching.Sub(start))
		})
	}
	wg.Wait()
	n := len(steps[order[0]])
	if n == 0 {
		fmt.Printf("admission steps of jobs %d-%d: no job read\n", from, to-1)
		return 0
	}
	took := last.Sub(first)
	fmt.Printf("admission of jobs %d-%d from their timelines: %d jobs from the first submit to the last Launching in %s (%.1f jobs/s)\n",
		from, to-1, n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	for _, name := range order {
		d := steps[name]
		slices.Sort(d)
		fmt.Printf("  %-24s p50 %9s  p90 %9s  max %9s\n", name, d[len(d)/2].Round(time.Millisecond),
			d[len(d)*9/10].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	return float64(n) / took.Seconds()
}

// timelineAt is the time of the first timeline entry in phase, zero if none.
func timelineAt(tl []schemas.TimelineEntry, phase schemas.JobPhase) time.Time {
	for _, e := range tl {
		if e.Phase == phase {
			return e.Time
		}
	}
	return time.Time{}
}

// childCPU is the CPU time used so far by each process under this one (Temporal, NATS,
// versitygw, the control plane), keyed by its command name.
func childCPU() map[string]time.Duration {
	self := os.Getpid()
	parent := map[int]int{}
	cpu := map[int]time.Duration{}
	name := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15)
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+2:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		parent[pid], name[pid] = ppid, s[open+1:closing]
		cpu[pid] = time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
	}
	out := map[string]time.Duration{}
	for pid := range cpu {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == self {
				out[name[pid]] += cpu[pid]
				break
			}
		}
	}
	return out
}

// printChildCPU prints the CPU each child process used between two childCPU readings.
func printChildCPU(a, b map[string]time.Duration, over time.Duration) {
	names := make([]string, 0, len(b))
	for n := range b {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y string) int { return int(b[y] - a[y] - (b[x] - a[x])) })
	var parts []string
	for _, n := range names {
		if d := b[n] - a[n]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %s (%.0f%%)", n, d.Round(100*time.Millisecond), 100*d.Seconds()/over.Seconds()))
		}
	}
	fmt.Printf("  CPU of the other processes over %s: %s\n", over.Round(time.Second), strings.Join(parts, ", "))
}
