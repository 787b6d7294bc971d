package itest

import (
	"context"
	"testing"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// ListedJobs lists a workspace's jobs that carry label (key=value), through the API's
// listing (Temporal visibility), as job name → how many times listed: a job listed
// twice is a duplicate.
func ListedJobs(t *testing.T, ctx context.Context, c *dlc.Client, ws, label string) map[string]int {
	t.Helper()
	out := map[string]int{}
	opts := dlc.ListOptions{Labels: []string{label}}
	for {
		l, err := c.ListJobs(ctx, ws, opts)
		if err != nil {
			t.Fatalf("list jobs: %v", err)
		}
		for _, it := range l.Items {
			out[it.Name]++
		}
		if opts.PageToken = l.NextPageToken; opts.PageToken == "" {
			return out
		}
	}
}

// StartedRuns are the runs of a schedule's status that started a job, by job name.
func StartedRuns(st schemas.ScheduleStatus) map[string]schemas.ScheduleRun {
	out := map[string]schemas.ScheduleRun{}
	for _, list := range [][]schemas.ScheduleRun{st.History, st.Running} {
		for _, r := range list {
			if r.Job != "" {
				out[r.Job] = r
			}
		}
	}
	return out
}

// SucceededRuns counts the finished runs of a schedule's status that succeeded.
func SucceededRuns(st schemas.ScheduleStatus) int {
	n := 0
	for _, r := range st.History {
		if r.Outcome == schemas.RunSucceeded {
			n++
		}
	}
	return n
}
