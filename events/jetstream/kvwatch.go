package jetstream

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LoadWatched reads the current values a new watcher of bucket sends first, passing
// each to apply, up to the nil entry that marks their end. It answers the highest
// revision read. The dispatchers (notify, triggers) load their rules this way before
// they consume, then keep watching for changes.
func LoadWatched(ctx context.Context, w jetstream.KeyWatcher, bucket string, apply func(jetstream.KeyValueEntry)) (uint64, error) {
	var last uint64
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return last, fmt.Errorf("watch %s: closed while loading", bucket)
			}
			if e == nil {
				return last, nil
			}
			apply(e)
			last = max(last, e.Revision())
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// Rewatch starts a new watcher of every key of kv after the previous one ended (its
// connection closed), trying again every second and logging what fails, until ctx
// ends; then it answers nil. The new watcher sends every current value again.
func Rewatch(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger, what string) jetstream.KeyWatcher {
	for {
		w, err := kv.WatchAll(ctx)
		if err == nil {
			return w
		}
		log.Error("watching "+what, "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// MinAckWait is the shortest ack wait the dispatchers' consumers accept: a shorter one
// would deliver events again while their first delivery is still under way.
const MinAckWait = time.Second

// CheckAckWait refuses a consumer ack wait shorter than MinAckWait.
func CheckAckWait(d time.Duration) error {
	if d < MinAckWait {
		return fmt.Errorf("ack wait %s: must be at least %s", d, MinAckWait)
	}
	return nil
}
