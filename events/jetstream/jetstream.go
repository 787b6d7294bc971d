// Package jetstream publishes and reads OpenDLC's events on NATS JetStream: it creates the
// streams with their retention limits, publishes with deterministic Nats-Msg-Id headers so
// retried activities never duplicate a message, and reads a job's logs back.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/events"
)

// Client publishes to and reads from OpenDLC's streams.
type Client struct {
	nc *nats.Conn
	js jetstream.JetStream
	// reader: a workspace reader's client (NewReader), which may not ask for stream
	// info or messages by sequence.
	reader bool
}

// Connect dials NATS at url and returns a Client; call Close when done. natsOpts are
// passed to nats.Connect (credentials, TLS...).
func Connect(url string, natsOpts ...nats.Option) (*Client, error) {
	natsOpts = append([]nats.Option{nats.Name("opendlc"), nats.MaxReconnects(-1)}, natsOpts...)
	nc, err := nats.Connect(url, natsOpts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect %s: %w", url, err)
	}
	c, err := New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// New wraps an existing connection. It does not take ownership of nc unless created
// through Connect.
func New(nc *nats.Conn) (*Client, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(publishAckTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Client{nc: nc, js: js}, nil
}

// NewReader wraps the connection of a reader of workspace (WorkspacePermissions): its
// JetStream requests go through the Gate, under ReaderAPIPrefix(workspace).
func NewReader(nc *nats.Conn, workspace string) (*Client, error) {
	js, err := jetstream.NewWithAPIPrefix(nc, ReaderAPIPrefix(workspace))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Client{nc: nc, js: js, reader: true}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// Conn returns the client's NATS connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// JetStream exposes the underlying JetStream handle for readers.
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// EnsureStreams declares every stream and bucket OpenDLC uses (see the package
// function EnsureStreams) on this client's connection.
func (c *Client) EnsureStreams(ctx context.Context, opts ...Option) error {
	return EnsureStreams(ctx, c.js, opts...)
}

// publishAckTimeout bounds the wait for each message's acknowledgement in Publish. A
// message can be lost on its way without its publisher seeing a disconnect: sent through
// a server that stays up, to a stream leader that dies. nats.go waits for such an
// acknowledgement without end (asynchronous publishes) or for as long as the caller's
// context lasts, and the log forwarder, whose context lasts as long as the job and which
// heartbeats all the while, then stalled until the job's log drain gave up on it (CI lost
// 6,500 lines of a job when the test killed the log stream's leader). Bounded, Publish
// fails and its caller publishes again, which message ids make safe.
var publishAckTimeout = 10 * time.Second // a variable for tests

// Publish publishes msgs in order and waits for every acknowledgement, each at most
// publishAckTimeout. Messages with an id already seen within the stream's duplicate
// window are acknowledged as duplicates and not stored again, so a retried call is safe.
func (c *Client) Publish(ctx context.Context, msgs ...events.Msg) error {
	if len(msgs) == 1 {
		m := msgs[0]
		ctx, cancel := context.WithTimeout(ctx, publishAckTimeout)
		defer cancel()
		_, err := c.js.Publish(ctx, m.Subject, m.Data, jetstream.WithMsgID(m.ID))
		if err != nil {
			return fmt.Errorf("jetstream: publish %s: %w", m.Subject, err)
		}
		return nil
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := c.js.PublishAsync(m.Subject, m.Data, jetstream.WithMsgID(m.ID))
		if err != nil {
			return fmt.Errorf("jetstream: publish %s: %w", m.Subject, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("jetstream: publish %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// LastMsg returns the data of the newest message on subject in stream, or nil when the
// subject has none.
func (c *Client) LastMsg(ctx context.Context, stream, subject string) ([]byte, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("jetstream: stream %s: %w", stream, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: last message on %s: %w", subject, err)
	}
	return m.Data, nil
}

// ReadUntil delivers, in stream order, every message of stream whose subject matches
// filter, to fn. With done nil it returns once it has delivered what was stored when it
// started. Otherwise it follows new messages until done() reports true while it is
// caught up and no message has arrived for a moment; ctx ends it early. fn may return
// ErrStop to end the read without error.
func (c *Client) ReadUntil(ctx context.Context, stream, filter string, done func() bool, fn func(subject string, data []byte) error) error {
	return c.read(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}, done, fn)
}

// ReadSince is ReadUntil for the messages stored at or after since.
func (c *Client) ReadSince(ctx context.Context, stream, filter string, since time.Time, done func() bool, fn func(subject string, data []byte) error) error {
	return c.read(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &since,
	}, done, fn)
}

// consumerPlaced sees each read's consumer as created; tests replace it to see where
// NATS placed it.
var consumerPlaced = func(*jetstream.ConsumerInfo) {}

// leaderAskTimeout bounds each try of leaderLast's requests.
const leaderAskTimeout = 5 * time.Second

// leaderAskFor bounds how long leaderLast asks again a leader that does not answer (as
// right after a server of the cluster restarted, while the stream's leader is being
// elected), and leaderAskEvery how often.
var leaderAskFor, leaderAskEvery = 15 * time.Second, 100 * time.Millisecond

// catchUpWait bounds how long a read waits, caught up with its consumer but short of the
// newest message the stream's leader has, for the consumer's replica to catch up.
const catchUpWait = 15 * time.Second

func (c *Client) read(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig, done func() bool, fn func(subject string, data []byte) error) error {
	// A read ends when its consumer has nothing pending. An ordered consumer is R1 and
	// NATS places it on any peer of an R3 stream, including one that has just restarted
	// and is still catching up: its "nothing pending" then comes early, and a job's logs
	// read (or archived) right after a server restart missed every line the server had
	// not received yet. So a read also waits until it has delivered the newest matching
	// message that the stream's leader knows of (leaderLast).
	var last uint64
	if done == nil {
		last = c.leaderLast(ctx, stream, cfg.FilterSubjects)
	}
	// No stream lookup otherwise: a workspace reader may not ask for stream info
	// (WorkspacePermissions), only create a consumer filtered on its subjects.
	cfg.InactiveThreshold = ReadInactive
	cons, err := c.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("jetstream: consumer on %v: %w", cfg.FilterSubjects, err)
	}
	defer c.release(stream, cons) // after the iterator stops (defers run last first)
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("jetstream: consumer info: %w", err)
	}
	consumerPlaced(info)
	if done == nil && info.NumPending == 0 && last == 0 {
		return nil
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("jetstream: messages: %w", err)
	}
	defer it.Stop()

	var caughtUp atomic.Bool
	var lastMsg atomic.Int64
	var seen atomic.Uint64
	caughtUp.Store(info.NumPending == 0)
	lastMsg.Store(time.Now().UnixNano())
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		const idle = 300 * time.Millisecond
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		target, targetSet := last, done == nil
		for {
			select {
			case <-finished:
				return
			case <-ctx.Done():
				it.Stop()
				return
			case <-t.C:
				quiet := time.Since(time.Unix(0, lastMsg.Load()))
				if !caughtUp.Load() || quiet <= idle {
					continue
				}
				if !targetSet {
					if !done() {
						continue
					}
					target, targetSet = c.leaderLast(ctx, stream, cfg.FilterSubjects), true
				}
				if seen.Load() >= target || quiet > catchUpWait {
					it.Stop()
					return
				}
			}
		}
	}()
	for {
		m, err := nextMsg(ctx, it, "next message")
		if m == nil {
			return err
		}
		lastMsg.Store(time.Now().UnixNano())
		md, err := m.Metadata()
		pending := uint64(1)
		if err == nil {
			pending = md.NumPending
			seen.Store(md.Sequence.Stream)
		}
		if err := fn(m.Subject(), m.Data()); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
		caughtUp.Store(pending == 0)
		if done == nil && pending == 0 && seen.Load() >= last {
			return nil
		}
	}
}

// leaderLast is the stream sequence of the newest message on filters (one subject
// filter) as the stream's leader answers (not a direct get, which any replica answers),
// or 0 when there is none, or the caller may not ask (a workspace reader: the Gate lets
// it create consumers only), or the leader did not answer for leaderAskFor: only then
// does the read end on its consumer's word alone. (A read that gave up at the first
// unanswered request, right after a server restarted, delivered nothing of a stream of
// 10,000 messages: its consumer sat on the restarted replica, which had none yet.)
func (c *Client) leaderLast(ctx context.Context, stream string, filters []string) uint64 {
	if len(filters) != 1 || c.reader {
		return 0
	}
	return askLeader(ctx, func(ctx context.Context) (uint64, bool) {
		s, err := c.js.Stream(ctx, stream)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return 0, true
		case err != nil:
			return 0, false
		}
		return lastOnLeader(ctx, s, filters[0])
	})
}

// askLeader calls ask, each time within leaderAskTimeout, until it answers (ok) or
// leaderAskFor has passed, and returns its last answer (0 when it never answered).
func askLeader(ctx context.Context, ask func(context.Context) (last uint64, ok bool)) uint64 {
	deadline := time.Now().Add(leaderAskFor)
	for {
		actx, cancel := context.WithTimeout(ctx, leaderAskTimeout)
		last, ok := ask(actx)
		cancel()
		if ok || !time.Now().Before(deadline) {
			return last
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(leaderAskEvery):
		}
	}
}

// lastOnLeader is the stream sequence of the newest message on subject as s's leader
// answers, or 0 when there is none or the stream allows direct gets (which any replica
// answers, so the leader's word cannot be had); ok is false when the leader did not
// answer.
func lastOnLeader(ctx context.Context, s jetstream.Stream, subject string) (last uint64, ok bool) {
	if s.CachedInfo().Config.AllowDirect {
		return 0, true
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, true
	case err != nil:
		return 0, false
	}
	return m.Sequence, true
}

// ErrStop is returned by a ReadUntil callback to end the read without error.
var ErrStop = errors.New("jetstream: stop reading")

// nextMsg answers the iterator's next message; without one (nil), the context's error
// once it is done, nil once the iterator is stopped, else the error, which what names.
func nextMsg(ctx context.Context, it jetstream.MessagesContext, what string) (jetstream.Msg, error) {
	m, err := it.Next()
	if err == nil {
		return m, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
		return nil, nil
	}
	return nil, fmt.Errorf("jetstream: %s: %w", what, err)
}
