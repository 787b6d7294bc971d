package schedule

import "slices"

// OverlapPolicy says what a schedule does with a run that is due while earlier runs of the
// same schedule are still running.
type OverlapPolicy string

// Overlap policies.
const (
	// Skip drops the new run (recorded as Skipped). The default.
	Skip OverlapPolicy = "skip"
	// BufferOne starts the new run as soon as the running ones have finished; while one run
	// already waits, further ones are dropped.
	BufferOne OverlapPolicy = "bufferOne"
	// BufferAll queues every new run and starts them one at a time, in order, each after
	// the previous one has finished (at most MaxBuffered waiting).
	BufferAll OverlapPolicy = "bufferAll"
	// CancelOther stops the running runs and starts the new one once they have stopped; a
	// run still waiting for that is replaced by the newer one.
	CancelOther OverlapPolicy = "cancelOther"
	// AllowAll starts the new run at once, alongside the running ones.
	AllowAll OverlapPolicy = "allowAll"
)

// OverlapPolicies lists every policy in a stable order.
var OverlapPolicies = []OverlapPolicy{Skip, BufferOne, BufferAll, CancelOther, AllowAll}

// MaxBuffered bounds the runs waiting under BufferAll; further runs are skipped.
const MaxBuffered = 1000

// Action is what to do with a run that is due.
type Action string

// Actions.
const (
	// ActionStart starts the run now.
	ActionStart Action = "Start"
	// ActionSkip drops the run.
	ActionSkip Action = "Skip"
	// ActionBuffer queues the run until no run is running.
	ActionBuffer Action = "Buffer"
)

// Decision is the overlap policy's answer for one due run.
type Decision struct {
	Action Action
	// DropBuffered: runs already waiting are dropped (superseded by this one).
	DropBuffered bool
	// CancelRunning: the running runs are to be stopped.
	CancelRunning bool
}

// Decide applies policy p to a run that is due while running runs of the schedule are
// still running and buffered runs wait to start. An empty policy is Skip.
func Decide(p OverlapPolicy, running, buffered int) Decision {
	if p == AllowAll {
		return Decision{Action: ActionStart}
	}
	if running == 0 && buffered == 0 {
		return Decision{Action: ActionStart}
	}
	switch p {
	case BufferOne:
		if buffered == 0 {
			return Decision{Action: ActionBuffer}
		}
		return Decision{Action: ActionSkip}
	case BufferAll:
		if buffered < MaxBuffered {
			return Decision{Action: ActionBuffer}
		}
		return Decision{Action: ActionSkip}
	case CancelOther:
		return Decision{Action: ActionBuffer, DropBuffered: buffered > 0, CancelRunning: running > 0}
	}
	if running == 0 {
		// Skip with nothing running: only buffered runs (from a backfill) wait; the policy
		// is about running runs, so start.
		return Decision{Action: ActionStart}
	}
	return Decision{Action: ActionSkip}
}

// StartBuffered reports whether the oldest buffered run may start: when no run is running.
func StartBuffered(running int) bool { return running == 0 }

// Valid reports whether p is a known policy (empty counts as the default, Skip).
func (p OverlapPolicy) Valid() bool {
	if p == "" {
		return true
	}
	return slices.Contains(OverlapPolicies, p)
}
