package jetstream_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
)

// ReadAfter reads a subject piece by piece from a stream sequence: what is stored at
// once (even without waiting), then, with a wait, what arrives later; a read from the
// same sequence reads the same messages again.
func TestReadAfter(t *testing.T) {
	ctx, c := connect(t)
	if err := c.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	subject, other := events.JobMetricsSubject("ws", "a"), events.JobMetricsSubject("ws", "b")
	publish := func(subj string, from, to int) {
		for i := from; i <= to; i++ {
			if err := c.Publish(ctx, events.Msg{Subject: subj, ID: fmt.Sprint(subj, i), Data: []byte(strconv.Itoa(i))}); err != nil {
				t.Errorf("publish %d: %v", i, err)
			}
		}
	}
	type msg struct {
		seq  uint64
		data string
	}
	read := func(after uint64, limit int, wait time.Duration) []msg {
		var got []msg
		if err := c.ReadAfter(ctx, jetstream.EventsStream, subject, after, limit, wait, func(seq uint64, data []byte) error {
			got = append(got, msg{seq, string(data)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	publish(subject, 1, 3)
	publish(other, 1, 2)
	publish(subject, 4, 5)

	all := read(0, 100, 0) // stored messages are read without waiting for new ones
	var data []string
	for _, m := range all {
		data = append(data, m.data)
	}
	if diff := cmp.Diff([]string{"1", "2", "3", "4", "5"}, data); diff != "" {
		t.Fatalf("read(0) (-want +got):\n%s", diff)
	}
	if again := read(all[1].seq, 2, 0); len(again) != 2 || again[0] != all[2] || again[1] != all[3] {
		t.Errorf("read after the second message, limit 2: %v, want %v", again, all[2:4])
	}
	last := all[len(all)-1].seq
	if got := read(last, 100, 0); len(got) != 0 {
		t.Errorf("read after the last message without waiting: %v", got)
	}
	start := time.Now()
	if got := read(last, 100, 300*time.Millisecond); len(got) != 0 {
		t.Errorf("read after the last message: %v", got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("an empty read with a wait returned after %s", d)
	}
	published := make(chan struct{})
	go func() {
		defer close(published)
		time.Sleep(200 * time.Millisecond)
		publish(subject, 6, 6)
	}()
	if got := read(last, 100, 10*time.Second); len(got) != 1 || got[0].data != "6" {
		t.Errorf("read of a message published while waiting: %v", got)
	}
	<-published
}
