package workflows_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// An experiment publishes one phase event per transition, in order, numbered with its
// trial events, the last one with the outcome; the first is Pending with no previous
// phase (changePendingPhaseEvents), as a job's first event is.
func TestExperimentPublishesPhaseEvents(t *testing.T) {
	h := newExpHarness(t)
	h.execute(t, testExperiment())
	st := h.result(t)

	var got []string
	for _, p := range h.phases {
		got = append(got, p.Previous+">"+p.Phase+":"+p.Reason)
	}
	if diff := cmp.Diff([]string{">Pending:Accepted", "Pending>Running:Started", "Running>Succeeded:MaxTrialsReached"}, got); diff != "" {
		t.Fatalf("phase events (-want +got):\n%s", diff)
	}
	last := h.phases[len(h.phases)-1]
	if last.Experiment != "tune" || last.Trials != len(st.Trials) || last.Completed != st.Completed ||
		last.BestTrial == nil || *last.BestTrial != *st.BestTrial || last.Seq <= h.phases[0].Seq {
		t.Errorf("last phase event %+v; status %d trials, %d completed, best %v", last, len(st.Trials), st.Completed, st.BestTrial)
	}
	if first := h.phases[0]; first.Seq != 1 {
		t.Errorf("the Pending event has seq %d, want 1", first.Seq)
	}
}
