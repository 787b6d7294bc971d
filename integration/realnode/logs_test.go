package realnode

import (
	"fmt"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// A container's log, read from the real kubelet while it is written: a client following
// the job (dlc job logs -f) sees the lines as they come, the worker that forwards them is
// SIGKILLed mid-run and started again, and the job's log ends with every line exactly
// once, in order, the new worker going on from where the old one stopped.
func TestLogsFollowAcrossAWorkerRestart(t *testing.T) {
	ctx := itest.Context(t, 5*time.Minute)
	const ws, name, lines = "rn-logs", "counter", 60
	submit(t, ctx, shellJob(name, ws, env.training.Root.Ref,
		fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo line-$i; i=$((i+1)); sleep 0.2; done`, lines), ""))
	followed := make(chan []string, 1)
	go func() {
		var got []string
		err := env.api.Logs(ctx, ws, name, dlc.LogOptions{Follow: true}, func(r events.LogRecord) error {
			got = append(got, r.Line)
			return nil
		})
		if err != nil {
			t.Errorf("follow: %v", err)
		}
		followed <- got
	}()
	itest.WaitJob(t, ctx, env.api, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	// Once some lines are through, the worker dies without a word and comes back.
	itest.Eventually(t, ctx, "the first lines forwarded", func() bool { return len(jobLogs(t, ctx, ws, name)) >= 10 })
	stopWorker()
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, ctx, ws, name)
	var want []string
	for i := 1; i <= lines; i++ {
		want = append(want, fmt.Sprintf("line-%d", i))
	}
	var stored []string
	for _, r := range jobLogs(t, ctx, ws, name) {
		stored = append(stored, r.Line)
	}
	if fmt.Sprint(stored) != fmt.Sprint(want) {
		t.Errorf("the job's log after the worker restart:\n%v\nwant line-1..line-%d, each once", stored, lines)
	}
	select {
	case got := <-followed:
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the follower saw:\n%v\nwant line-1..line-%d, each once", got, lines)
		}
	case <-ctx.Done():
		t.Fatal("the follower did not end with the job")
	}
}
