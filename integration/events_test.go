package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

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

// A followed stream answers with its headers at once, before it has a line to send: a
// client waits inside its request otherwise (the Python client found it). Both
// followers are asked about a workspace and a job with nothing in them yet; each request
// must return while the stream is still empty, and the stream then stays open.
func TestFollowedStreamsAnswerBeforeTheirFirstLine(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	submit(t, ctx, itest.JobDoc("quiet", ws, `
  framework: custom
  command: [sh, -c, 'sleep 30']
  roles: {worker: {replicas: 1}}
`))
	for _, path := range []string{
		"/v1/workspaces/" + ws + "/events?follow=true&type=opendlc.no.such.type",
		"/v1/workspaces/" + ws + "/jobs/quiet/logs?follow=true",
	} {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, env.e.APIURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+env.e.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET %s: %v (no headers before the first line)", path, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
		// The stream is open and empty: a read waits until the request is cancelled.
		done := make(chan int)
		go func() {
			n, _ := resp.Body.Read(make([]byte, 1))
			done <- n
		}()
		cancel()
		if n := <-done; n != 0 {
			t.Errorf("GET %s: the stream had a line already, so the test showed nothing", path)
		}
		resp.Body.Close()
	}
	if _, err := env.api.StopJob(ctx, ws, "quiet", "test over"); err != nil {
		t.Fatal(err)
	}
}
