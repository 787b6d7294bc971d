package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/jstest"
	"github.com/opendlc/opendlc/schemas"
)

// LogProgress, on a real JetStream, sums the line numbers of each replica's newest log
// record of this run and attempt: it grows as lines are forwarded, and a replica whose
// newest record is another run's or attempt's, or that has none, counts nothing.
func TestLogProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, _ := jstest.Start(t, ctx)
	a := &activities.JobActivities{Publisher: js, LogStream: jetstream.LogsStream}
	ref := backend.GangRef{Workspace: "ws", Job: "j", Attempt: 1}
	reps := []schemas.ReplicaStatus{{Name: "j-worker-0", Role: "worker", Index: 0}, {Name: "j-worker-1", Role: "worker", Index: 1}, {Name: "j-worker-2", Role: "worker", Index: 2}}
	line := func(uid string, attempt, index int, seq int64) {
		rec := events.LogRecord{Workspace: "ws", Job: "j", UID: uid, Attempt: attempt, Role: "worker", Index: index, Seq: seq, Line: "x"}
		data, _ := json.Marshal(rec)
		if err := js.Publish(ctx, events.Msg{Subject: events.JobLogSubject("ws", "j", "worker", index),
			ID: fmt.Sprint(uid, attempt, index, seq), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	progress := func() int64 {
		p, err := a.LogProgress(ctx, activities.LogProgressInput{Ref: ref, UID: "u1", Replicas: reps})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := progress(); p != 0 {
		t.Fatalf("progress with no records: %d, want 0", p)
	}
	line("u1", 1, 0, 10)
	line("u1", 1, 1, 7)
	line("u1", 0, 2, 99) // the previous attempt's
	if p := progress(); p != 17 {
		t.Fatalf("progress: %d, want 10+7 (replica 2's newest record is attempt 0's)", p)
	}
	line("u1", 1, 0, 11)
	line("u1", 1, 2, 3)
	if p := progress(); p != 21 {
		t.Fatalf("progress after three more lines: %d, want 11+7+3", p)
	}
	line("u2", 1, 1, 50) // a later run of the same name
	if p := progress(); p != 14 {
		t.Fatalf("progress: %d, want 11+3 (replica 1's newest record is another run's)", p)
	}
}
