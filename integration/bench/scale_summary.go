package main

import (
	"fmt"
	"slices"
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
	return nil
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
