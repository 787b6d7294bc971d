package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DeleteWhere deletes from stream every message on filter whose payload match accepts,
// and returns how many it deleted. It reads what the stream held when it started; a
// message already gone (dropped by retention) is not an error. `dlc job delete --purge`
// removes one job run's events and log records this way, leaving other runs' on the
// same subjects.
func (c *Client) DeleteWhere(ctx context.Context, stream, filter string, match func(data []byte) bool) (int, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("jetstream: stream %s: %w", stream, err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy,
		InactiveThreshold: ReadInactive,
	})
	if err != nil {
		return 0, fmt.Errorf("jetstream: consumer on %s: %w", filter, err)
	}
	defer c.release(stream, cons)
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("jetstream: consumer info: %w", err)
	}
	if info.NumPending == 0 {
		return 0, nil
	}
	// One iterator, so one consumer for the whole read: each Next of an ordered consumer
	// itself makes a new consumer (and deletes the last in the background).
	it, err := cons.Messages()
	if err != nil {
		return 0, fmt.Errorf("jetstream: messages of %s: %w", filter, err)
	}
	defer it.Stop() // before the consumer's release, deferred earlier
	var seqs []uint64
	for range info.NumPending {
		msg, err := it.Next(jetstream.NextMaxWait(5 * time.Second))
		if err != nil {
			if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
				break // the rest was dropped meanwhile
			}
			return 0, fmt.Errorf("jetstream: read %s: %w", filter, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return 0, err
		}
		if match(msg.Data()) {
			seqs = append(seqs, md.Sequence.Stream)
		}
	}
	n := 0
	for _, seq := range seqs {
		if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, fmt.Errorf("jetstream: delete message %d of %s: %w", seq, stream, err)
		}
		n++
	}
	return n, nil
}
