package activities

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// batchRecorder records each Publish call's messages.
type batchRecorder struct {
	lastMsgPublisher
	mu      sync.Mutex
	batches [][]string
}

func (p *batchRecorder) Publish(_ context.Context, msgs ...events.Msg) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	p.batches = append(p.batches, ids)
	return nil
}

func (p *batchRecorder) published() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.batches...)
}

// linesBackend delivers the lines sent on its channel as one replica's log, until the
// channel closes.
type linesBackend struct {
	backend.Backend
	lines     chan string
	following chan struct{} // closed once FollowLogs is called
}

func (b *linesBackend) FollowLogs(_ context.Context, _ backend.GangRef, _ string, _ int64, fn func(backend.LogLine) error) error {
	close(b.following)
	seq := int64(0)
	for line := range b.lines {
		seq++
		if err := fn(backend.LogLine{Seq: seq, Time: time.Now(), Stream: "stdout", Line: line}); err != nil {
			return err
		}
	}
	return nil
}

// A line that starts a batch is published one flush interval later even when nothing
// follows it, lines that arrive meanwhile go in the same batch, and a log that has
// written nothing publishes nothing.
func TestLogForwarderFlushesABatchOneIntervalAfterItStarts(t *testing.T) {
	pub := &batchRecorder{}
	lines := make(chan string)
	follow := &linesBackend{lines: lines, following: make(chan struct{})}
	const every = 250 * time.Millisecond
	f := &logForwarder{
		a:       &JobActivities{Publisher: pub, Backend: follow, LogFlushInterval: every},
		in:      ForwardLogsInput{Ref: backend.GangRef{Workspace: "ws", Job: "j", Attempt: 0}, UID: "u"},
		replica: schemas.ReplicaStatus{Name: "j-worker-0-a0", Role: "worker"}, onProgress: func(int64) {},
	}
	done := make(chan error, 1)
	go func() { done <- f.run(context.Background()) }()

	<-follow.following // the forwarder runs, and no line has come
	if b := pub.published(); len(b) != 0 {
		t.Fatalf("a quiet log published %v", b)
	}
	start := time.Now()
	lines <- "a"
	lines <- "b"
	testutil.Eventually(t, 5*time.Second, "the first batch published", func() bool { return len(pub.published()) > 0 }, 5*time.Millisecond)
	took := time.Since(start)
	b := pub.published()
	if len(b) != 1 || len(b[0]) != 2 {
		t.Fatalf("published %v, want one batch of the 2 lines", b)
	}
	if took < every {
		t.Errorf("the batch went after %v, before its flush interval %v", took, every)
	}
	lines <- "c" // a second batch, flushed on its own interval too
	testutil.Eventually(t, 5*time.Second, "the second batch published", func() bool { return len(pub.published()) >= 2 }, 5*time.Millisecond)
	if b := pub.published(); len(b) != 2 || len(b[1]) != 1 {
		t.Fatalf("published %v, want a second batch of 1 line", b)
	}
	close(lines)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
