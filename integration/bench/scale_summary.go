package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// scaleResult is what one scale run measured, for the summary of several runs.
type scaleResult struct {
	points                           []pointResult
	listP50, listP99, getP50, getP99 time.Duration
	historyEvents                    int64
	actions                          int
	natsPerJob                       float64
	peakRSS                          int64
}

// pointResult is one point of a scale run: the step that brought the running jobs to
// running.
type pointResult struct {
	running int
	// admission is the step's jobs per second, submit to Launching, from the jobs'
	// timelines.
	admission float64
	// allRunning is from the step's first submit to all its jobs listed Running.
	allRunning time.Duration
	// cpu is the CPU per job of each part of the stack over the step, from the first
	// submit to all its jobs Running.
	cpu cpuPerJob
	// rates are the medians of the measuring windows.
	rates rates
}

// runScaleRepeated runs the scale run runs times, each on a fresh stack, and then prints
// each figure's min, median and max over the runs.
func runScaleRepeated(o scaleOptions, runs int) error {
	var results []scaleResult
	for r := range runs {
		if runs > 1 {
			fmt.Printf("\n# run %d of %d\n", r+1, runs)
		}
		res, err := runScale(o)
		if err != nil {
			// The runs that completed are still figures: print them before giving up.
			if len(results) > 1 {
				printScaleSummary(results)
			}
			return fmt.Errorf("run %d of %d: %w", r+1, runs, err)
		}
		results = append(results, res)
	}
	if runs > 1 {
		printScaleSummary(results)
	}
	// The goal is on the last step (the most jobs running): the median over the runs.
	var ratios []float64
	running := 0
	for _, r := range results {
		if len(r.points) > 0 {
			last := r.points[len(r.points)-1]
			ratios, running = append(ratios, last.cpu.ratio()), last.running
		}
	}
	if len(ratios) > 0 {
		atMostRatio(fmt.Sprintf("scale: CPU per admitted job, OpenDLC+Temporal+NATS over Kubernetes (%d jobs)", running), medianF(ratios), 1.0/3)
	}
	printGoals()
	return nil
}

// cpuPerJob is the CPU seconds per admitted job of each part of the stack.
type cpuPerJob struct {
	dlc, temporal, nats, kube float64
}

// ratio is OpenDLC's, Temporal's and NATS's CPU together over Kubernetes' own.
func (c cpuPerJob) ratio() float64 {
	if c.kube == 0 {
		return 0
	}
	return (c.dlc + c.temporal + c.nats) / c.kube
}

func (c cpuPerJob) String() string {
	return fmt.Sprintf("OpenDLC (the bench process: worker, API server and the bench's client) %.3f s, Temporal %.3f s, NATS %.3f s; Kubernetes (API server, etcd, scheduler, controller manager, kwok) %.3f s; ratio %.2f",
		c.dlc, c.temporal, c.nats, c.kube, c.ratio())
}

// cpuShares groups the child processes' CPU between two childCPU readings by part of
// the stack, with self the bench process's own, per job of jobs.
func cpuShares(a, b map[string]time.Duration, self time.Duration, jobs int) cpuPerJob {
	var c cpuPerJob
	if jobs <= 0 {
		return c
	}
	for name, d := range b {
		v := (d - a[name]).Seconds()
		switch {
		case strings.HasPrefix(name, "temporal"):
			c.temporal += v
		case strings.HasPrefix(name, "nats"):
			c.nats += v
		case strings.HasPrefix(name, "kube-"), strings.HasPrefix(name, "etcd"), strings.HasPrefix(name, "kwok"):
			c.kube += v
		}
	}
	c.dlc = self.Seconds()
	n := float64(jobs)
	c.dlc, c.temporal, c.nats, c.kube = c.dlc/n, c.temporal/n, c.nats/n, c.kube/n
	return c
}

// printScaleSummary prints min, median and max over the runs of every figure.
func printScaleSummary(results []scaleResult) {
	fmt.Printf("\n## %d runs: min, median and max of each figure\n\n", len(results))
	fmt.Printf("%-52s %12s %12s %12s\n", "figure", "min", "median", "max")
	row := func(name string, f func(scaleResult) float64, format func(float64) string) {
		v := make([]float64, len(results))
		for i, r := range results {
			v[i] = f(r)
		}
		slices.Sort(v)
		fmt.Printf("%-52s %12s %12s %12s\n", name, format(v[0]), format(v[len(v)/2]), format(v[len(v)-1]))
	}
	num := func(d int) func(float64) string { return func(x float64) string { return fmt.Sprintf("%.*f", d, x) } }
	dur := func(x float64) string { return time.Duration(x).Round(time.Millisecond).String() }
	for i, p := range results[0].points {
		at := func(f func(pointResult) float64) func(scaleResult) float64 {
			return func(r scaleResult) float64 {
				if i < len(r.points) {
					return f(r.points[i])
				}
				return 0
			}
		}
		row(fmt.Sprintf("%d jobs: admission, jobs/s (timelines)", p.running), at(func(p pointResult) float64 { return p.admission }), num(1))
		row(fmt.Sprintf("%d jobs: step's first submit -> all Running", p.running), at(func(p pointResult) float64 { return float64(p.allRunning) }), dur)
		for c, name := range rateColumns {
			row(fmt.Sprintf("%d running: %s (median window)", p.running, name), at(func(p pointResult) float64 { return p.rates[c] }), num(2))
		}
	}
	row("API list p50", func(r scaleResult) float64 { return float64(r.listP50) }, dur)
	row("API list p99", func(r scaleResult) float64 { return float64(r.listP99) }, dur)
	row("API get/describe p50", func(r scaleResult) float64 { return float64(r.getP50) }, dur)
	row("API get/describe p99", func(r scaleResult) float64 { return float64(r.getP99) }, dur)
	row("history events per running job (median)", func(r scaleResult) float64 { return float64(r.historyEvents) }, num(0))
	row("Temporal actions per job, heartbeats apart (median)", func(r scaleResult) float64 { return float64(r.actions) }, num(0))
	row("NATS messages per job", func(r scaleResult) float64 { return r.natsPerJob }, num(1))
	row("peak RSS of the bench process in the run, MiB", func(r scaleResult) float64 { return float64(r.peakRSS >> 20) }, num(0))
}
