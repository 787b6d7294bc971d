package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/hpo"
)

// Slot scheduling of the Experiment workflow (change changeExperimentSlots): a trial
// starts as soon as any of the parallelism slots frees, and the algorithms see every
// trial known at that moment.
//
// Before the change, trial N waited until trials 0..N-parallelism had all finished, and
// the sampler and the early-stopping rule saw exactly those, so that what they saw did
// not depend on the order in which trials finished; the price was that a slot freed by a
// pruned or short trial waited for the oldest running one. Now a freed slot is refilled
// at once: the suggestion for the new trial is computed from every trial as it is when
// the slot frees (finished trials with their outcome, running ones with their parameters
// and the reports read so far), and an early-stopping decision compares a trial with
// every other trial's reports as they are at that report. Both are taken inside
// workflow.SideEffect (suggest, addReports), so the answers are in the history: a
// replay after a crash or a worker restart reads them back and rebuilds the same trial
// history as the original run, whatever the timing of the replay. Two separate runs of
// one spec and seed give the same trials only if their trials finish in the same order.

// changeExperimentSlots: a trial starts as soon as a slot frees, suggested from every
// trial known at that moment.
const changeExperimentSlots = "experiment-slots"

// slotsVersion asks, once per run, whether the run schedules trials by slot. Histories
// recorded before the change carry no marker and keep the ordered schedule.
func slotsVersion(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, changeExperimentSlots, workflow.DefaultVersion, 1) == 1
}

// mayStartNew reports whether trial n may start now that a slot is free: always with slot
// scheduling; otherwise once trials 0..n-parallelism have finished.
func (w *experimentWorkflow) mayStartNew(n int) bool {
	if w.slots {
		return true
	}
	for k := 0; k <= n-w.parallelism(); k++ {
		if !w.st.Trials[k].Phase.Final() {
			return false
		}
	}
	return true
}

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
