package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/events/jetstream"
)

// envStreamReplicas names the environment variable that sets --nats-stream-replicas.
const envStreamReplicas = "DLC_NATS_STREAM_REPLICAS"

// registerStreamReplicas adds --nats-stream-replicas: how many servers of a NATS
// cluster hold each of OpenDLC's streams and buckets (jetstream.WithReplicas; default
// 0: keep what the streams have, 1 for new ones; $DLC_NATS_STREAM_REPLICAS sets it,
// configOptions.Complete).
func registerStreamReplicas(fs *pflag.FlagSet, n *int) {
	fs.IntVar(n, "nats-stream-replicas", 0, fmt.Sprintf(
		"NATS cluster: keep each stream and bucket on this many servers, 1 to %d (3 on a three-server cluster survives losing one; give every process the same; default: what the streams have, 1 for new ones)",
		jetstream.MaxReplicas))
}

// streamReplicasOption is the stream option of --nats-stream-replicas n; none for 0. It
// names the flag or variable that holds a bad value.
func streamReplicasOption(n int) ([]jetstream.Option, error) {
	if v := os.Getenv(envStreamReplicas); v != "" {
		if _, err := strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("%s: %q is not a number of replicas (1 to %d)", envStreamReplicas, v, jetstream.MaxReplicas)
		}
	}
	if n == 0 {
		return nil, nil
	}
	if n < 1 || n > jetstream.MaxReplicas {
		return nil, fmt.Errorf("--nats-stream-replicas: %d: must be 1 to %d", n, jetstream.MaxReplicas)
	}
	return []jetstream.Option{jetstream.WithReplicas(n)}, nil
}
