package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// trialSeconds is how long each benchmark trial's process runs.
const trialSeconds = 1

// measureTrialOverhead runs an experiment of n one-second trials, one at a time, and
// returns, per trial, the time from the suggestion being decided (the trial's start
// time in the experiment's status) to the trial's process starting (the first line it
// prints: the wall clock in nanoseconds).
func measureTrialOverhead(ctx context.Context, c *client.Client, n int) ([]time.Duration, error) {
	const ws, name = "bench-hpo", "overhead"
	spec := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: %s, workspace: %s}
spec:
  searchSpace:
  - {name: x, type: float, min: 0, max: 1}
  objective: {metric: objective, direction: minimize}
  algorithm: {name: random, seed: 1}
  maxTrials: %d
  parallelism: 1
  trialTemplate:
    framework: custom
    command: [sh, -c, 'date +%%s%%N; sleep %d; echo "dlc:metric step=1 objective=${params.x}"']
    roles: {worker: {replicas: 1}}
`, name, ws, n, trialSeconds)
	if _, err := c.CreateExperiment(ctx, []byte(spec)); err != nil {
		return nil, fmt.Errorf("create experiment: %w", err)
	}
	exp, err := c.WaitExperiment(ctx, ws, name, 200*time.Millisecond, false, nil)
	if err != nil {
		return nil, err
	}
	if exp.Status.Phase != schemas.ExperimentSucceeded {
		return nil, fmt.Errorf("experiment %s: %s", exp.Status.Phase, exp.Status.Message)
	}
	var out []time.Duration
	for _, tr := range exp.Status.Trials {
		if tr.StartTime == nil {
			return nil, fmt.Errorf("trial %d has no start time", tr.ID)
		}
		started, err := firstLineTime(ctx, c, ws, tr.Job)
		if err != nil {
			return nil, fmt.Errorf("trial %d: %w", tr.ID, err)
		}
		out = append(out, started.Sub(*tr.StartTime))
	}
	return out, nil
}

// firstLineTime reads the wall clock a job's replica printed first.
func firstLineTime(ctx context.Context, c *client.Client, ws, job string) (time.Time, error) {
	var first string
	err := c.Logs(ctx, ws, job, client.LogOptions{}, func(r events.LogRecord) error {
		if first == "" {
			first = strings.TrimSpace(r.Line)
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	ns, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("first line %q is not a clock", first)
	}
	return time.Unix(0, ns), nil
}
