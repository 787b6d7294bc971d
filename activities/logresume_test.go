package activities

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// lastMsgPublisher answers LastMsg with one stored message.
type lastMsgPublisher struct {
	Publisher
	data []byte
}

func (p lastMsgPublisher) LastMsg(context.Context, string, string) ([]byte, error) {
	return p.data, nil
}

// resumingBackend records where FollowLogsFrom and FollowLogs were asked to start.
type resumingBackend struct {
	backend.Backend
	from  *backend.LogCursor
	after *int64
}

func (b *resumingBackend) FollowLogs(_ context.Context, _ backend.GangRef, _ string, afterSeq int64, _ func(backend.LogLine) error) error {
	b.after = &afterSeq
	return nil
}

type timeResumingBackend struct{ resumingBackend }

func (b *timeResumingBackend) FollowLogsFrom(_ context.Context, _ backend.GangRef, _ string, from backend.LogCursor, _ func(backend.LogLine) error) error {
	b.from = &from
	return nil
}

// The forwarder resumes after the last stored record of this job attempt: by time and
// text where the backend can (kubernetes), by sequence number otherwise.
func TestLogForwarderResumePoint(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 123456789, time.UTC)
	in := ForwardLogsInput{Ref: backend.GangRef{Workspace: "ws", Job: "j", Attempt: 2}, UID: "u1"}
	rec := func(uid string, attempt int) []byte {
		b, _ := json.Marshal(events.LogRecord{UID: uid, Attempt: attempt, Seq: 41, Time: at, Stream: "stdout", Line: "epoch 3"})
		return b
	}
	tests := map[string]struct {
		data []byte
		want backend.LogCursor
	}{
		"this attempt's record":    {rec("u1", 2), backend.LogCursor{Seq: 41, Time: at, Stream: "stdout", Line: "epoch 3"}},
		"another attempt's record": {rec("u1", 1), backend.LogCursor{}},
		"another job's record":     {rec("u0", 2), backend.LogCursor{}},
		"no record":                {nil, backend.LogCursor{}},
		"not a record":             {[]byte("{"), backend.LogCursor{}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := &logForwarder{a: &JobActivities{Publisher: lastMsgPublisher{data: tt.data}}, in: in,
				replica: schemas.ReplicaStatus{Name: "j-worker-0-a2"}}
			got, err := f.resumePoint(context.Background(), "subject")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cursor (-want +got):\n%s", diff)
			}

			byTime := &timeResumingBackend{}
			if err := followLogs(context.Background(), byTime, in.Ref, "r", got, nil); err != nil {
				t.Fatal(err)
			}
			if byTime.from == nil || *byTime.from != got || byTime.after != nil {
				t.Errorf("a LogResumer got %v (FollowLogs %v), want FollowLogsFrom %v", byTime.from, byTime.after, got)
			}
			bySeq := &resumingBackend{}
			if err := followLogs(context.Background(), bySeq, in.Ref, "r", got, nil); err != nil {
				t.Fatal(err)
			}
			if bySeq.after == nil || *bySeq.after != got.Seq {
				t.Errorf("a plain backend got FollowLogs %v, want after %d", bySeq.after, got.Seq)
			}
		})
	}
}
