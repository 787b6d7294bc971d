package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// canceledMessages are the Temporal SDK's log messages that, with a cancellation as their
// error, only say that the workflow cancelled an activity on purpose: a gang watch or a
// log forwarder of a job that ended, whose last heartbeat or result meets the cancelled
// context. The SDK logs them at WARN and ERROR; sdkLogger lowers those to DEBUG, and
// also a heartbeat refused because the activity's workflow has completed
// (workflowCompleted).
var canceledMessages = map[string]bool{
	heartbeatError:    true,
	"Activity error.": true,
	pollError:         true,
}

// pollError is the SDK's message for a poll that ended; while the worker stops, its
// error is "worker stopping" (the worker's own shutdown, not a fault).
const pollError = "Failed to poll for task."

// sdkLogger is the Temporal SDK's logger over l, which logs the cancellations of
// canceledMessages at DEBUG instead of WARN or ERROR; everything else is as l logs it.
type sdkLogger struct{ log.Logger }

// newSDKLogger returns the logger the Temporal client and worker use.
func newSDKLogger(l *slog.Logger) log.Logger {
	return sdkLogger{log.NewStructuredLogger(l)}
}

// Warn logs at WARN, or at DEBUG for a cancellation of canceledMessages.
func (s sdkLogger) Warn(msg string, keyvals ...any) {
	if isCancellation(msg, keyvals) {
		s.Debug(msg, keyvals...)
		return
	}
	s.Logger.Warn(msg, keyvals...)
}

// Error logs at ERROR, or at DEBUG for a cancellation of canceledMessages.
func (s sdkLogger) Error(msg string, keyvals ...any) {
	if isCancellation(msg, keyvals) {
		s.Debug(msg, keyvals...)
		return
	}
	s.Logger.Error(msg, keyvals...)
}

// With returns the logger with keyvals added to every line, still lowering cancellations.
func (s sdkLogger) With(keyvals ...any) log.Logger {
	return sdkLogger{log.With(s.Logger, keyvals...)}
}

// canceled reports whether err is a cancellation: the context's, the activity's, or
// the server call's (a heartbeat whose gRPC call was cut short answers codes.Canceled).
func canceled(err error) bool {
	if errors.Is(err, context.Canceled) || temporal.IsCanceledError(err) {
		return true
	}
	if _, ok := errors.AsType[*serviceerror.Canceled](err); ok {
		return true
	}
	return status.Code(err) == codes.Canceled
}

// heartbeatError is the SDK's message for a heartbeat the server refused.
const heartbeatError = "RecordActivityHeartbeat with error"

// workflowCompleted reports whether err is the server's answer to a heartbeat of an
// activity whose workflow has completed (NotFound, "workflow execution already
// completed"): a watch that was still pending when its workflow ended, such as an
// experiment's trial-metrics watch, which then ends (activities.WatchTrialMetrics).
func workflowCompleted(err error) bool {
	nf, ok := errors.AsType[*serviceerror.NotFound](err)
	return ok && strings.Contains(nf.Error(), "workflow execution already completed")
}

// isCancellation reports whether msg is one of canceledMessages and its error a
// cancellation.
func isCancellation(msg string, keyvals []any) bool {
	if !canceledMessages[msg] {
		return false
	}
	for i := 0; i+1 < len(keyvals); i += 2 {
		if err, ok := keyvals[i+1].(error); ok {
			return canceled(err) || (msg == heartbeatError && workflowCompleted(err)) ||
				(msg == pollError && err.Error() == "worker stopping")
		}
	}
	return false
}
