package jetstream_test

import (
	"strings"
	"testing"

	"github.com/opendlc/opendlc/events/jetstream"
)

// WithReplicas takes 1 to 5 and names the bad value otherwise; on one server, streams
// and buckets are made with 1 replica with or without it. (Three replicas on a cluster,
// kept by a process that gives no count: integration/topology.)
func TestWithReplicas(t *testing.T) {
	ctx, c := connect(t)
	js := c.JetStream()
	for _, n := range []int{0, -1, 6} {
		err := jetstream.EnsureStreams(ctx, js, jetstream.WithReplicas(n))
		if err == nil || !strings.Contains(err.Error(), "replicas") {
			t.Errorf("WithReplicas(%d): %v, want an error naming replicas", n, err)
		}
	}
	if err := jetstream.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := jetstream.EnsureStreams(ctx, js, jetstream.WithReplicas(1)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{jetstream.EventsStream, jetstream.LogsStream, "KV_" + jetstream.AuthBucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 1 {
			t.Errorf("%s: %d replicas, want 1", name, r)
		}
	}
}
