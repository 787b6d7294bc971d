package integration

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Every attempt of the status publisher reports failure once after it has published, so
// Temporal retries it and it publishes the same messages again: the stream still holds
// exactly one event per transition, in order, because each carries a deterministic
// Nats-Msg-Id.
func TestRetriedStatusPublishDuplicatesNothing(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	env.faults.failAfter("/"+ws+"/", workflows.ActivityPublishEvents, 3)
	submit(t, ctx, itest.JobDoc("retried", ws, `
  framework: custom
  command: [sh, -c, 'echo working']
  roles: {worker: {replicas: 2}}
`))
	if st := waitTerminal(t, ctx, ws, "retried").Status; st.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s: %s", st.Phase, st.Message)
	}
	if n := env.faults.count("/"+ws+"/", workflows.ActivityPublishEvents); n != 3 {
		t.Fatalf("injected %d failures, want 3", n)
	}
	evs := statusEvents(t, ctx, ws, "retried")
	if diff := cmp.Diff([]string{"Pending", "Launching", "Running", "Succeeded"}, phasesOf(evs)); diff != "" {
		t.Errorf("status events (-want +got):\n%s", diff)
	}

	// The same events through the API (dlc events tail), filtered by type and job.
	var got []string
	err := env.api.Events(ctx, ws, dlc.EventOptions{Type: events.TypeJobPhase, Job: "retried"}, func(ev events.Event) error {
		if ev.Type != events.TypeJobPhase || ev.Workspace != ws || ev.Subject != "retried" {
			t.Errorf("unexpected event %+v", ev)
		}
		got = append(got, ev.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range evs {
		want = append(want, fmt.Sprintf("%s:status:%d", e.UID, e.Seq))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event ids from the API (-want +got):\n%s", diff)
	}
}
