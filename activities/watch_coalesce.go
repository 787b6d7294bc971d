package activities

import (
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// DefaultWatchCoalesce is how long WatchGang holds a change that is only a gang's
// progress on its way up (JobActivities.WatchCoalesce).
const DefaultWatchCoalesce = time.Second

// watchCoalesce is JobActivities.WatchCoalesce or its default; negative: off.
func (a *JobActivities) watchCoalesce() time.Duration {
	switch {
	case a.WatchCoalesce < 0:
		return 0
	case a.WatchCoalesce == 0:
		return DefaultWatchCoalesce
	}
	return a.WatchCoalesce
}

// decisiveChange reports whether the change from old to cur must reach the workflow at
// once rather than with the changes that follow it: the replica list changed, a
// replica ended or was stopped, an exit code appeared, a replica left Running, or every
// replica runs now (the job becomes Running). What is left, and held by WatchGang for
// up to its coalescing window, is progress of a gang coming up: replicas placed on
// nodes and replicas starting while others still wait. Without holding it, a
// 64-replica gang coming up one pod at a time cost the workflow one WatchGang
// completion, workflow task and new WatchGang per pod.
func decisiveChange(old, cur []schemas.ReplicaStatus) bool {
	if len(old) != len(cur) {
		return true
	}
	allRunning, wasAllRunning := true, true
	for i := range old {
		o, c := old[i], cur[i]
		if c.Phase != schemas.ReplicaRunning {
			allRunning = false
		}
		if o.Phase != schemas.ReplicaRunning {
			wasAllRunning = false
		}
		switch {
		case o.Name != c.Name, !equalCode(o.ExitCode, c.ExitCode):
			return true
		case o.Phase == c.Phase:
			continue
		case c.Phase != schemas.ReplicaPending && c.Phase != schemas.ReplicaRunning:
			return true // ended or stopped
		case o.Phase != schemas.ReplicaPending:
			return true // left Running (or came back from an end)
		}
	}
	return allRunning && !wasAllRunning
}
