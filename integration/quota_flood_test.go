package integration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Issue 33, finding 8, on the real stack: after a flood of submissions a workspace's
// quota wedged, two jobs counted as admitted but never told (their quota-decision
// signals, sent in the workflow task that continued the quota as new, were dropped by
// the server), and every job behind them Queued for ever. The flood was 500
// jobs against the quota's bound of 2,000 events; here the quota's bound is lowered to
// 40 events (the test knob, historyBounds) so that 30 jobs of 1 CPU, submitted at
// once against a 2-CPU quota, make it continue as new every few admissions. Every job
// must succeed and the quota must end empty. Before the fix, the flood wedged within
// its first minute.
func TestQuotaFloodEveryJobAdmitted(t *testing.T) {
	t.Parallel()
	const jobs = 30
	ctx := itest.Context(t, 8*time.Minute)
	ws := workspace(t)
	historyBounds.lower(workflows.QuotaWorkflowID(ws), workflows.HistoryBound{MaxEvents: 40})
	if err := env.api.SetQuota(ctx, ws, api.Quota{CPU: "2"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for i := range jobs {
		wg.Go(func() {
			_, err := env.api.SubmitJob(ctx, []byte(itest.JobDoc(fmt.Sprintf("f%02d", i), ws, `
  framework: custom
  command: [sh, -c, "sleep 0.5"]
  roles: {worker: {replicas: 1, resources: {cpu: "1"}}}
`)))
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("submit: %v", err)
	}

	// Every job ends; a job Queued for two minutes after the others stopped moving
	// means the queue is stuck.
	var phases map[string]int
	lastMove, lastDone := time.Now(), -1
	for {
		list, err := env.api.ListJobs(ctx, ws, dlc.ListOptions{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		phases = map[string]int{}
		done := 0
		for _, j := range list.Items {
			phases[string(j.Phase)]++
			if j.Phase.Terminal() {
				done++
			}
		}
		if done == jobs && len(list.Items) == jobs {
			break
		}
		if done != lastDone {
			lastMove, lastDone = time.Now(), done
		}
		if time.Since(lastMove) > 2*time.Minute || ctx.Err() != nil {
			q, _ := env.api.GetQuota(context.Background(), ws)
			t.Fatalf("the quota queue is stuck: %d of %d jobs ended, phases %v; quota %s", done, jobs, phases, quotaSummary(q))
		}
		time.Sleep(time.Second)
	}
	if phases[string(schemas.JobSucceeded)] != jobs {
		t.Errorf("phases %v: want all %d Succeeded", phases, jobs)
	}
	// A job gives its share back after it has entered its final phase.
	testutil.Eventually(t, time.Minute, "the quota to admit and queue nothing once the last job ended", func() error {
		q, err := env.api.GetQuota(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Admitted) != 0 || len(q.Queue) != 0 {
			return errors.New(quotaSummary(q))
		}
		return nil
	}, 500*time.Millisecond)
	runs := quotaRuns(t, ctx, ws)
	t.Logf("%d jobs through a 2-CPU quota; the quota ran %d runs", jobs, runs)
	if runs < 3 {
		t.Errorf("the quota ran %d runs: the test does not exercise its continue-as-new", runs)
	}
}

// quotaSummary says what a quota holds, for a failure message.
func quotaSummary(q *api.QuotaStatus) string {
	if q == nil {
		return "unknown"
	}
	var admitted []string
	for _, j := range q.Admitted {
		admitted = append(admitted, j.Job)
	}
	sort.Strings(admitted)
	return fmt.Sprintf("used %s CPU by [%s], %d queued", q.Used.CPU, strings.Join(admitted, " "), len(q.Queue))
}

// quotaRuns counts the runs of a workspace's quota workflow.
func quotaRuns(t *testing.T, ctx context.Context, ws string) int {
	t.Helper()
	d, err := env.temporal.DescribeWorkflowExecution(ctx, workflows.QuotaWorkflowID(ws), "")
	if err != nil {
		t.Fatal(err)
	}
	first := d.GetWorkflowExecutionInfo().GetFirstRunId()
	return len(jobRuns(t, ctx, workflows.QuotaWorkflowID(ws), first))
}
