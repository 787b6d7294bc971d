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

// The SDK logger lowers to DEBUG the messages that say nothing is wrong, and keeps the
// level of the same messages with another error and of other messages with the same
// error; loggers made With keyvals behave the same.
func TestSDKLoggerLevels(t *testing.T) {
	canceled := fmt.Errorf("heartbeat: %w", context.Canceled)
	done := serviceerror.NewNotFound("workflow execution already completed")
	for _, tc := range []struct {
		name string
		// log writes through the SDK logger; want is each line's level, in order.
		log  func(l log.Logger)
		want []string
		// keyvals is what a line made With must still hold (line: index).
		keyvals string
		line    int
	}{{
		// An activity the workflow cancelled.
		name: "cancellations",
		log: func(l log.Logger) {
			l.Warn("RecordActivityHeartbeat with error", "Error", canceled)
			log.With(l, "ActivityType", "WatchGang").Error("Activity error.", "Attempt", 1, "Error", temporal.NewCanceledError())
			l.Warn("RecordActivityHeartbeat with error", "Error", status.Error(codes.Canceled, "context canceled"))
			l.Warn("RecordActivityHeartbeat with error", "Error", serviceerror.NewCanceled("context canceled"))
			l.Warn("RecordActivityHeartbeat with error", "Error", errors.New("connection refused"))
			l.Error("Activity error.", "Error", errors.New("boom"))
			l.Error("Workflow panic", "Error", canceled)
		},
		want:    []string{"DEBUG", "DEBUG", "DEBUG", "DEBUG", "WARN", "ERROR", "ERROR"},
		keyvals: "ActivityType=WatchGang", line: 1,
	}, {
		// A heartbeat the server refuses because the activity's workflow has completed
		// (the trial-metrics watch of an experiment that just ended); another NotFound,
		// and the same error under another message, keep their level.
		name: "heartbeats of completed workflows",
		log: func(l log.Logger) {
			log.With(l, "ActivityType", "WatchTrialMetrics").Warn("RecordActivityHeartbeat with error", "Error", done)
			l.Warn("RecordActivityHeartbeat with error", "Error", serviceerror.NewNotFound("namespace missing"))
			l.Warn("RecordActivityHeartbeat with error", "Error", errors.New("workflow execution already completed"))
			l.Error("Activity error.", "Error", done)
		},
		want:    []string{"DEBUG", "WARN", "WARN", "ERROR"},
		keyvals: "ActivityType=WatchTrialMetrics", line: 0,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(newSDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(tc.want), buf.String())
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], "level="+w) {
					t.Errorf("line %d: %s, want level=%s", i, lines[i], w)
				}
			}
			if !strings.Contains(lines[tc.line], tc.keyvals) {
				t.Errorf("With lost its keyvals: %s", lines[tc.line])
			}
		})
	}
}
