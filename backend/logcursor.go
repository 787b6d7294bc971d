package backend

import (
	"context"
	"time"
)

// StreamGap is the LogLine.Stream of a gap record: a line the backend adds to a
// replica's log where part of it could not be read (a finished pod whose log the
// kubelet no longer serves, a log rotated away while nobody followed it). Its Line
// says what is missing and why, starting with GapPrefix; its Time is that of the last
// line read before the gap (the time of the gap record itself when none was read).
const StreamGap = "gap"

// GapPrefix starts the Line of every gap record, so it reads as one in plain log
// output.
const GapPrefix = "[opendlc log gap] "

// LogCursor is where a replica's forwarded log stops: the last line forwarded.
type LogCursor struct {
	// Seq is the number of the last line forwarded (0: none); lines after it are
	// numbered on from Seq+1.
	Seq int64
	// Time and Line are those of the last line forwarded, and Stream its stream
	// (StreamGap for a gap record). A zero Time means they are unknown.
	Time   time.Time
	Stream string
	Line   string
}

// LogResumer is implemented by backends that resume a log by time rather than by line
// number: the kubernetes backend, where the kubelet rotates logs, so the line numbers
// of a container's log change under it.
type LogResumer interface {
	// FollowLogsFrom is FollowLogs resuming after the line from describes: lines
	// older than from.Time are skipped, those of the same time are compared with
	// from.Line to find where forwarding stopped, and the lines delivered are
	// numbered from from.Seq+1.
	FollowLogsFrom(ctx context.Context, ref GangRef, replica string, from LogCursor, fn func(LogLine) error) error
}
