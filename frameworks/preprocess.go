package frameworks

import (
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Preprocess runs N independent shards of a data-processing program (role "worker"):
// no rendezvous, each shard takes its slice of the input by DLC_SHARD_INDEX and
// DLC_SHARD_COUNT. The job succeeds when every shard has.
type Preprocess struct{ shards }

// Name returns "preprocess".
func (Preprocess) Name() schemas.Framework { return schemas.FrameworkPreprocess }

// shardEnv numbers the replicas in RankOrder, which for the single "worker" role is
// their index.
func shardEnv(g backend.GangSpec, r backend.ReplicaSpec) []schemas.EnvVar {
	return []schemas.EnvVar{
		{Name: "DLC_SHARD_INDEX", Value: strconv.Itoa(rankOf(g, r))},
		{Name: "DLC_SHARD_COUNT", Value: strconv.Itoa(len(g.Replicas))},
	}
}
