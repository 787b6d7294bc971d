package jetstream

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SetConsumerPlaced replaces the hook that sees each read's consumer as created, until
// the returned function restores it.
func SetConsumerPlaced(f func(*jetstream.ConsumerInfo)) (restore func()) {
	old := consumerPlaced
	consumerPlaced = f
	return func() { consumerPlaced = old }
}

// SetPublishAckTimeout replaces publishAckTimeout for the clients created until the
// returned function restores it.
func SetPublishAckTimeout(d time.Duration) (restore func()) {
	old := publishAckTimeout
	publishAckTimeout = d
	return func() { publishAckTimeout = old }
}
