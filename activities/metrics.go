package activities

import (
	"encoding/json"
	"time"

	"github.com/opendlc/opendlc/events"
)

// recordPhases counts the job phase events among msgs, once they are published. A
// retried publish counts them again: the counter is at least once.
func (a *JobActivities) recordPhases(msgs []events.Msg) {
	if a.Metrics == nil {
		return
	}
	for _, m := range msgs {
		var ev struct {
			Type      string `json:"type"`
			Workspace string `json:"workspace"`
			Data      struct {
				Phase string `json:"phase"`
			} `json:"data"`
		}
		if json.Unmarshal(m.Data, &ev) != nil || ev.Type != events.TypeJobPhase || ev.Data.Phase == "" {
			continue
		}
		a.Metrics.JobPhase(ev.Workspace, ev.Data.Phase)
	}
}

// recordLaunch records a launch that started at start and ended with err.
func (a *JobActivities) recordLaunch(start time.Time, err error) {
	if a.Metrics == nil {
		return
	}
	a.Metrics.Launch(a.Backend.Name(), time.Since(start), err)
}

// recordForwarded counts the replica lines of the batch just published and their lag.
// It runs under f.mu.
func (f *logForwarder) recordForwarded() {
	now := time.Now()
	for _, t := range f.written {
		f.a.Metrics.LogLineForwarded(t, now)
	}
	f.written = f.written[:0]
}
