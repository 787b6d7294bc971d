package frameworks

import (
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Inference runs N independent shards of a batch-inference program, like Preprocess.
type Inference struct{}

// Name returns "inference".
func (Inference) Name() schemas.Framework { return schemas.FrameworkInference }

// PortNames returns nil: shards do not talk to each other.
func (Inference) PortNames() []string { return nil }

// Env returns DLC_SHARD_INDEX and DLC_SHARD_COUNT.
func (Inference) Env(g backend.GangSpec, r backend.ReplicaSpec, _ Endpoints) []schemas.EnvVar {
	return shardEnv(g, r)
}

// Outcome fails the job when any shard fails and succeeds it when all have.
func (Inference) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return allSucceed(replicas)
}
