package main

import (
	"strings"
	"testing"
)

// --nats-stream-replicas takes 0 (keep) or 1 to 5; a bad value or variable is an
// error naming it.
func TestStreamReplicasOption(t *testing.T) {
	t.Setenv(envStreamReplicas, "")
	if opts, err := streamReplicasOption(0); err != nil || len(opts) != 0 {
		t.Errorf("0: %d options, %v; want none", len(opts), err)
	}
	if opts, err := streamReplicasOption(3); err != nil || len(opts) != 1 {
		t.Errorf("3: %d options, %v; want one", len(opts), err)
	}
	for _, n := range []int{-1, 6} {
		if _, err := streamReplicasOption(n); err == nil || !strings.Contains(err.Error(), "--nats-stream-replicas") {
			t.Errorf("%d: %v, want an error naming the flag", n, err)
		}
	}
	t.Setenv(envStreamReplicas, "three")
	if _, err := streamReplicasOption(0); err == nil || !strings.Contains(err.Error(), envStreamReplicas) {
		t.Errorf("%s=three: %v, want an error naming the variable", envStreamReplicas, err)
	}
}
