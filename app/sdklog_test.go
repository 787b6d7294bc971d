package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The SDK's messages about an activity the workflow cancelled are logged at DEBUG; the
// same messages with another error, and other messages with a cancellation, keep their
// level; loggers made With keyvals behave the same.
func TestSDKLoggerLowersCancellations(t *testing.T) {
	var buf bytes.Buffer
	l := newSDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	canceled := fmt.Errorf("heartbeat: %w", context.Canceled)
	l.Warn("RecordActivityHeartbeat with error", "Error", canceled)
	log.With(l, "ActivityType", "WatchGang").Error("Activity error.", "Attempt", 1, "Error", temporal.NewCanceledError())
	l.Warn("RecordActivityHeartbeat with error", "Error", status.Error(codes.Canceled, "context canceled"))
	l.Warn("RecordActivityHeartbeat with error", "Error", serviceerror.NewCanceled("context canceled"))
	l.Warn("RecordActivityHeartbeat with error", "Error", errors.New("connection refused"))
	l.Error("Activity error.", "Error", errors.New("boom"))
	l.Error("Workflow panic", "Error", canceled)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"level=DEBUG", "level=DEBUG", "level=DEBUG", "level=DEBUG", "level=WARN", "level=ERROR", "level=ERROR"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s, want %s", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[1], "ActivityType=WatchGang") {
		t.Errorf("With lost its keyvals: %s", lines[1])
	}
}
