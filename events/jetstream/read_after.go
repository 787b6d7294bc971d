package jetstream

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// storedWait bounds the wait for the first of the messages a read knows are stored.
const storedWait = 30 * time.Second

// ReadAfter delivers to fn, in stream order, the messages of subject in stream whose
// stream sequence is greater than after, at most limit of them. It waits up to wait for
// the first one and returns once it has delivered every message stored (or limit), so a
// caller that remembers the last sequence it saw can read a subject piece by piece and,
// after a crash, read the same pieces again from the same sequence. ctx ends it early.
func (c *Client) ReadAfter(ctx context.Context, stream, subject string, after uint64, limit int, wait time.Duration,
	fn func(seq uint64, data []byte) error) error {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("jetstream: stream %s: %w", stream, err)
	}
	if after >= s.CachedInfo().State.LastSeq && wait <= 0 {
		return nil
	}
	// The newest message on subject as the leader has it: the consumer may sit on a
	// replica still catching up (see read), whose "nothing pending" comes early.
	last := askLeader(ctx, func(ctx context.Context) (uint64, bool) { return lastOnLeader(ctx, s, subject) })
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{subject},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		InactiveThreshold: ReadInactive,
	})
	if err != nil {
		return fmt.Errorf("jetstream: consumer on %s: %w", subject, err)
	}
	defer c.release(stream, cons)
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("jetstream: consumer info: %w", err)
	}
	if info.NumPending == 0 && wait <= 0 && last <= after {
		return nil
	}
	if info.NumPending > 0 || last > after {
		// Messages are stored: wait for them, not merely for new ones.
		wait = max(wait, storedWait)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("jetstream: messages: %w", err)
	}
	defer it.Stop()

	// Stop waiting when nothing came within wait (or ctx ends); once a message came, the
	// loop below returns as soon as it is caught up.
	var got atomic.Bool
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		t := time.NewTimer(max(wait, 0))
		defer t.Stop()
		select {
		case <-finished:
		case <-ctx.Done():
			it.Stop()
		case <-t.C:
			if !got.Load() {
				it.Stop()
			}
		}
	}()
	var catchUp *time.Timer
	for n := 0; n < limit; {
		m, err := nextMsg(ctx, it, "next message on "+subject)
		if m == nil {
			return err
		}
		got.Store(true)
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("jetstream: message metadata: %w", err)
		}
		if err := fn(md.Sequence.Stream, m.Data()); err != nil {
			return err
		}
		n++
		if md.NumPending == 0 {
			if md.Sequence.Stream >= last {
				return nil
			}
			if catchUp == nil {
				// Caught up with a lagging replica: wait a bounded time for the rest.
				catchUp = time.AfterFunc(catchUpWait, it.Stop)
				defer catchUp.Stop()
			}
		}
	}
	return nil
}
