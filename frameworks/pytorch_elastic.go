package frameworks

import (
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// ElasticMaxRestarts is torchrun's --max-restarts (PET_MAX_RESTARTS) in an elastic
// job unless its env sets one: how many times each replica's torchrun agent may
// restart its worker processes after a member of the rendezvous failed (a lost
// replica, a replica removed by a scale). torchrun's own default, 0, would end every
// surviving replica at the first loss. A member joining (a replica added or replaced)
// does not count: torchrun restarts its workers for it without using up this budget.
const ElasticMaxRestarts = "100"

// elasticDefaults is the environment an elastic replica gets unless the job's env
// sets it: PET_MAX_RESTARTS, and PET_RDZV_CONF's is_host, which makes rank 0 (the
// replica PET_RDZV_ENDPOINT names) the one that hosts the c10d store even where every
// replica resolves the endpoint as local (the local backend's processes).
func elasticDefaults(r backend.ReplicaSpec, leader bool) []schemas.EnvVar {
	host := "0"
	if leader {
		host = "1"
	}
	return unlessSet(r,
		schemas.EnvVar{Name: "PET_MAX_RESTARTS", Value: ElasticMaxRestarts},
		schemas.EnvVar{Name: "PET_RDZV_CONF", Value: "is_host=" + host},
	)
}
