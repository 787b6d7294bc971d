package integration

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// keptLog is a slog handler that keeps, in one shared buffer, the records of level WARN
// and above and those whose message contains one of keep (at any level).
type keptLog struct {
	mu    *sync.Mutex
	buf   *bytes.Buffer
	inner slog.Handler
	keep  []string
}

func newKeptLog(keep ...string) *keptLog {
	k := &keptLog{mu: &sync.Mutex{}, buf: &bytes.Buffer{}, keep: keep}
	k.inner = slog.NewTextHandler(lockedWriter{k}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return k
}

type lockedWriter struct{ k *keptLog }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.k.mu.Lock()
	defer w.k.mu.Unlock()
	return w.k.buf.Write(p)
}

func (k *keptLog) Enabled(context.Context, slog.Level) bool { return true }

func (k *keptLog) Handle(ctx context.Context, r slog.Record) error {
	keep := r.Level >= slog.LevelWarn
	for _, s := range k.keep {
		keep = keep || strings.Contains(r.Message, s)
	}
	if !keep {
		return nil
	}
	return k.inner.Handle(ctx, r)
}

func (k *keptLog) WithAttrs(as []slog.Attr) slog.Handler {
	c := *k
	c.inner = k.inner.WithAttrs(as)
	return &c
}

func (k *keptLog) WithGroup(name string) slog.Handler {
	c := *k
	c.inner = k.inner.WithGroup(name)
	return &c
}

func (k *keptLog) lines() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.Split(strings.TrimSpace(k.buf.String()), "\n")
}

// When an experiment ends, the metrics watch of its last trials may still be pending:
// the workflow abandoned it when the trial's job ended. Its next heartbeat then meets a
// completed workflow, and the watch ends there as a normal end: the worker logs that at
// DEBUG ("RecordActivityHeartbeat with error ... workflow execution already completed",
// and the watch's own "trial metrics watch ends"), and never a WARN or an ERROR about a
// heartbeat or the watch. The test first waits until the heartbeat really met the
// completed workflow, so that the absence of a warning means something.
func TestExperimentEndsItsMetricsWatchQuietly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logs := newKeptLog("RecordActivityHeartbeat", "trial metrics watch")
	e := itest.StartStack(t, ctx, embedded.Config{Dir: filepath.Join(t.TempDir(), "stack"), WorkDir: env.dir, Logger: slog.New(logs)})
	c := itest.AdminClient(t, e)
	ws, name := "watchend", "quiet"
	spec := tuneSpec(t, ws, name, nil,
		tuneAlgorithm, "  algorithm: {name: random, seed: 3}\n",
		tuneEarlyStopping, "",
		"maxTrials: 16", "maxTrials: 2",
		"parallelism: 4", "parallelism: 2",
		`args: [--epochs, "10",`, `args: [--epochs, "3",`,
	)
	if _, err := c.CreateExperiment(ctx, []byte(spec)); err != nil {
		t.Fatal(err)
	}
	x := waitExperiment(t, ctx, c, ws, name)
	if x.Status.Phase != schemas.ExperimentSucceeded || x.Status.Completed != 2 {
		t.Fatalf("experiment %s (%s): %d completed", x.Status.Phase, x.Status.Message, x.Status.Completed)
	}
	ended := time.Now()

	// The fault: a heartbeat of a pending watch meets the completed workflow.
	var met, watchEnded []string
	testutil.Eventually(t, itest.Left(ctx), "a heartbeat to meet the completed workflow and the watch to end", func() error {
		met, watchEnded = nil, nil
		lines := logs.lines()
		for _, l := range lines {
			if strings.Contains(l, "RecordActivityHeartbeat") && strings.Contains(l, "workflow execution already completed") {
				met = append(met, l)
			}
			if strings.Contains(l, "trial metrics watch ends") {
				watchEnded = append(watchEnded, l)
			}
		}
		if len(met) == 0 || len(watchEnded) == 0 {
			return fmt.Errorf("heartbeat lines %q, watch-end lines %q; log:\n%s", met, watchEnded, strings.Join(lines, "\n"))
		}
		return nil
	}, 200*time.Millisecond)
	t.Logf("%s after the experiment ended, a pending watch's heartbeat met the completed workflow:\n%s\n%s",
		time.Since(ended).Round(time.Millisecond), met[0], watchEnded[0])
	for _, l := range append(met, watchEnded...) {
		if !strings.Contains(l, "level=DEBUG") {
			t.Errorf("not at DEBUG: %s", l)
		}
	}
	for _, l := range logs.lines() {
		if (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) &&
			(strings.Contains(l, "RecordActivityHeartbeat") || strings.Contains(l, "WatchTrialMetrics")) {
			t.Errorf("the watch's end logged a warning or an error: %s", l)
		}
	}
}
