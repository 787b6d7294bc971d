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

// EventSubjects are the subjects the events stream captures.
var EventSubjects = []string{
	"dlc.*.job.*.status", "dlc.*.job.*.metrics", "dlc.*.experiment.*.trial",
	"dlc.*.schedule.*.run", "dlc.*.node.*.health", "dlc.*.trigger.*.fired",
}

// Stream names.
const (
	EventsStream = "DLC_EVENTS"
	LogsStream   = "DLC_LOGS"
	// AuditStream keeps the API's audit events (events.AuditSubjects).
	AuditStream = "DLC_AUDIT"
)

// Retention limits one stream, like the TTL and size of an SLS logstore.
type Retention struct {
	// MaxAge drops messages older than this; zero keeps them forever.
	MaxAge time.Duration
	// MaxBytes bounds the stream's size; zero is unlimited.
	MaxBytes int64
	// MaxMsgsPerSubject bounds each subject (one job's status, one replica's logs);
	// zero is unlimited.
	MaxMsgsPerSubject int64
	// Duplicates is the window in which a repeated Nats-Msg-Id is dropped. It must
	// cover the longest time an activity may take to be retried.
	Duplicates time.Duration
}

// Options configure a Client.
type Options struct {
	Events Retention
	Logs   Retention
	Audit  Retention
}

// Option changes Options.
type Option func(*Options) error

// WithEventRetention sets the status/metric stream's limits. Default: 30 days, 1 GiB,
// unlimited per subject, 1 hour duplicate window.
func WithEventRetention(r Retention) Option {
	return func(o *Options) error { o.Events = r; return nil }
}

// WithLogRetention sets the log stream's limits. Default: 7 days, 4 GiB, unlimited per
// subject, 1 hour duplicate window.
func WithLogRetention(r Retention) Option {
	return func(o *Options) error { o.Logs = r; return nil }
}

// WithAuditRetention sets the audit stream's limits. Default: 365 days, 1 GiB,
// unlimited per subject, 1 hour duplicate window.
func WithAuditRetention(r Retention) Option {
	return func(o *Options) error { o.Audit = r; return nil }
}

// Client publishes to and reads from OpenDLC's streams.
type Client struct {
	nc *nats.Conn
	js jetstream.JetStream
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
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Client{nc: nc, js: js}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// JetStream exposes the underlying JetStream handle for readers.
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// EnsureStreams creates or updates OpenDLC's streams with the configured retention.
func (c *Client) EnsureStreams(ctx context.Context, opts ...Option) error {
	o := Options{
		Events: Retention{MaxAge: 30 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: time.Hour},
		Logs:   Retention{MaxAge: 7 * 24 * time.Hour, MaxBytes: 4 << 30, Duplicates: time.Hour},
		Audit:  Retention{MaxAge: 365 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: time.Hour},
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return err
		}
	}
	streams := []struct {
		name     string
		subjects []string
		r        Retention
	}{
		{EventsStream, EventSubjects, o.Events},
		{LogsStream, []string{"dlc.*.job.*.logs.>"}, o.Logs},
		{AuditStream, []string{events.AuditSubjects}, o.Audit},
	}
	for _, s := range streams {
		cfg := jetstream.StreamConfig{
			Name:              s.name,
			Subjects:          s.subjects,
			Storage:           jetstream.FileStorage,
			Retention:         jetstream.LimitsPolicy,
			Discard:           jetstream.DiscardOld,
			MaxAge:            s.r.MaxAge,
			MaxBytes:          orUnlimited(s.r.MaxBytes),
			MaxMsgsPerSubject: orUnlimited(s.r.MaxMsgsPerSubject),
			Duplicates:        s.r.Duplicates,
		}
		if _, err := c.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("jetstream: ensure stream %s: %w", s.name, err)
		}
	}
	return nil
}

func orUnlimited(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// Publish publishes msgs in order and waits for every acknowledgement. Messages with
// an id already seen within the stream's duplicate window are acknowledged as
// duplicates and not stored again, so a retried call is safe.
func (c *Client) Publish(ctx context.Context, msgs ...events.Msg) error {
	if len(msgs) == 1 {
		m := msgs[0]
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

func (c *Client) read(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig, done func() bool, fn func(subject string, data []byte) error) error {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("jetstream: stream %s: %w", stream, err)
	}
	cons, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("jetstream: consumer on %v: %w", cfg.FilterSubjects, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("jetstream: consumer info: %w", err)
	}
	if done == nil && info.NumPending == 0 {
		return nil
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("jetstream: messages: %w", err)
	}
	defer it.Stop()

	var caughtUp atomic.Bool
	var lastMsg atomic.Int64
	caughtUp.Store(info.NumPending == 0)
	lastMsg.Store(time.Now().UnixNano())
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		const idle = 300 * time.Millisecond
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-finished:
				return
			case <-ctx.Done():
				it.Stop()
				return
			case <-t.C:
				quiet := time.Since(time.Unix(0, lastMsg.Load())) > idle
				if done != nil && caughtUp.Load() && quiet && done() {
					it.Stop()
					return
				}
			}
		}
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("jetstream: next message: %w", err)
		}
		lastMsg.Store(time.Now().UnixNano())
		md, err := m.Metadata()
		pending := uint64(1)
		if err == nil {
			pending = md.NumPending
		}
		if err := fn(m.Subject(), m.Data()); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
		caughtUp.Store(pending == 0)
		if done == nil && pending == 0 {
			return nil
		}
	}
}

// ErrStop, returned by a ReadUntil callback, ends the read without error.
var ErrStop = errors.New("jetstream: stop reading")
