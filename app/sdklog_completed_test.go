package app

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/log"
)

// A heartbeat the server refuses because the activity's workflow has completed (the
// trial-metrics watch of an experiment that just ended) is logged at DEBUG; another
// NotFound, and the same error under another message, keep their level.
func TestSDKLoggerLowersHeartbeatsOfCompletedWorkflows(t *testing.T) {
	var buf bytes.Buffer
	l := newSDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	done := serviceerror.NewNotFound("workflow execution already completed")
	log.With(l, "ActivityType", "WatchTrialMetrics").Warn("RecordActivityHeartbeat with error", "Error", done)
	l.Warn("RecordActivityHeartbeat with error", "Error", serviceerror.NewNotFound("namespace missing"))
	l.Warn("RecordActivityHeartbeat with error", "Error", errors.New("workflow execution already completed"))
	l.Error("Activity error.", "Error", done)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"level=DEBUG", "level=WARN", "level=WARN", "level=ERROR"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s, want %s", i, lines[i], w)
		}
	}
}
