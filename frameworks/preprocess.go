package frameworks

import (
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Preprocess runs N independent shards of a data-processing program (role "worker"):
// no rendezvous, each shard takes its slice of the input by DLC_SHARD_INDEX (also
// JOB_COMPLETION_INDEX, as in an Indexed Job) and DLC_SHARD_COUNT. The job succeeds when
// every shard has.
type Preprocess struct{ shards }

// Name returns "preprocess".
func (Preprocess) Name() schemas.Framework { return schemas.FrameworkPreprocess }

// shardEnv numbers the replicas in RankOrder, which for the single "worker" role is
// their index: DLC_SHARD_INDEX and DLC_SHARD_COUNT, and the same index as
// JOB_COMPLETION_INDEX, the variable a Kubernetes Indexed Job gives each of its pods
// (batch/v1 completionMode: Indexed), so a shard program written for one runs unchanged.
func shardEnv(g backend.GangSpec, r backend.ReplicaSpec) []schemas.EnvVar {
	index := strconv.Itoa(rankOf(g, r))
	return []schemas.EnvVar{
		{Name: "DLC_SHARD_INDEX", Value: index},
		{Name: "DLC_SHARD_COUNT", Value: strconv.Itoa(len(g.Replicas))},
		{Name: "JOB_COMPLETION_INDEX", Value: index},
	}
}
