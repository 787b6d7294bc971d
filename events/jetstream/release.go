package jetstream

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A read creates an ephemeral consumer. JetStream limits how many consumers a stream may
// have (nats-server: 1,000 per stream unless the stream or account says otherwise), and
// an ephemeral consumer outlives its reader until it has been unused for its inactive
// threshold (nats.go's ordered consumers ask for 5 minutes). A stack that read a few times
// a second, as the API server, the experiment workflows' metric reads and the purge of
// deleted jobs do together, ran into that limit: every read, the stack's own included,
// was then refused with "maximum consumers limit reached". So each read deletes its
// consumer when it is done (ReleaseConsumer), and asks for ReadInactive, which bounds
// only what a crashed reader leaves behind.

// ReadInactive is the inactive threshold of a read's consumer: how long JetStream keeps
// it once no pull request of its reader is waiting. A read keeps a pull request waiting
// while it runs, so only a reader that died or stalled for this long loses its consumer
// (an ordered consumer then creates a new one where it stopped).
const ReadInactive = time.Minute

// releaseTimeout bounds the request that deletes a read's consumer.
const releaseTimeout = 5 * time.Second

// ReleaseConsumer deletes the server's consumer of an ordered consumer on stream that a
// read is done with (its message iterator stopped). It is best effort: a consumer left
// behind goes by itself after ReadInactive. Call it with the handle of the stack's own
// identities; a workspace reader may not delete consumers (WorkspacePermissions).
func ReleaseConsumer(js jetstream.JetStream, stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || info.Name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = js.DeleteConsumer(ctx, stream, info.Name) //nolint:errcheck // best effort: see ReadInactive
}

// release is ReleaseConsumer for c's reads; a workspace reader's consumer is left to
// ReadInactive.
func (c *Client) release(stream string, cons jetstream.Consumer) {
	if c.reader {
		return
	}
	ReleaseConsumer(c.js, stream, cons)
}
