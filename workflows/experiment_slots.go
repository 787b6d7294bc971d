package workflows

import (
	"github.com/opendlc/opendlc/hpo"
)

// Slot scheduling of the Experiment workflow: a trial starts as soon as any of the
// parallelism slots frees, and the algorithms see every trial known at that moment.
//
// A freed slot is refilled at once: the suggestion for the new trial is computed from
// every trial as it is when the slot frees (finished trials with their outcome, running
// ones with their parameters and the reports read so far), and an early-stopping
// decision compares a trial with every other trial's reports as they are at that
// report. Both are taken inside workflow.SideEffect (suggest, addReports), so the
// answers are in the history: a replay after a crash or a worker restart reads them
// back and rebuilds the same trial history as the original run, whatever the timing of
// the replay. Two separate runs of one spec and seed give the same trials only if their
// trials finish in the same order.

// knownHistory is every trial of the experiment as it is now but the one with id skip
// (-1 for none): finished ones with their outcome, running ones as Running with their
// parameters and the reports read so far.
func (w *experimentWorkflow) knownHistory(skip int) hpo.History {
	h := w.history()
	for _, t := range w.st.Trials {
		if t.ID != skip {
			h.Trials = append(h.Trials, hpoTrial(t))
		}
	}
	return h
}
