package kube

import (
	"context"
	"fmt"
)

// Launches take a slot first: at most DefaultLaunchConcurrency gangs of one backend
// create their objects at once, and the rest wait their turn (in arrival order, a Go
// channel's). Every request goes through the clientset's client-side budget
// (kube.ClientConfig: 50 a second), whose queue serves waiters in turn. Without slots,
// a thousand launches submitted together each put a request in that queue, wait for
// it, and put the next at the back: they all advance together, at the budget's rate
// shared a thousand ways, and their attempts time out (the activity's five minutes, or
// its heartbeat) before they finish. In the full-size scale run (1,000 jobs of 10 pods) that
// failed most jobs with "client rate limiter Wait returned an error: context
// canceled" (docs/performance.md). With slots, a launch that holds one has its
// requests in a short queue and finishes in seconds, and the launches finish one
// after another at the same total rate.

// DefaultLaunchConcurrency is how many gangs one backend launches at once by default.
const DefaultLaunchConcurrency = 16

// WithLaunchConcurrency sets how many gangs may launch at once. Default
// DefaultLaunchConcurrency.
func WithLaunchConcurrency(n int) Option {
	return func(b *Backend) error {
		if n < 1 {
			return fmt.Errorf("kube: launch concurrency %d: must be at least 1", n)
		}
		b.launchSlots = make(chan struct{}, n)
		return nil
	}
}

// takeLaunchSlot waits for a launch slot, or for ctx to end; the returned func gives
// the slot back.
func (b *Backend) takeLaunchSlot(ctx context.Context) (release func(), err error) {
	select {
	case b.launchSlots <- struct{}{}:
		return func() { <-b.launchSlots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("kube: waiting for a launch slot: %w", ctx.Err())
	}
}
