package frameworks

import (
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Custom is for programs with their own rendezvous: it tells each replica who is in
// the gang and where, and leaves the protocol (and the ports) to the program.
type Custom struct {
	noPorts
	allSucceedRule
}

// Name returns "custom".
func (Custom) Name() schemas.Framework { return schemas.FrameworkCustom }

// Env returns DLC_HOSTS (role-index=host for every replica, comma-separated, in rank
// order), DLC_WORLD_SIZE and DLC_RANK.
func (Custom) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	order := RankOrder(g)
	hosts := make([]string, len(order))
	for i, x := range order {
		hosts[i] = x.Role + "-" + strconv.Itoa(x.Index) + "=" + ep.Host(x.Role, x.Index)
	}
	return []schemas.EnvVar{
		{Name: "DLC_HOSTS", Value: strings.Join(hosts, ",")},
		{Name: "DLC_WORLD_SIZE", Value: strconv.Itoa(len(order))},
		{Name: "DLC_RANK", Value: strconv.Itoa(rankOf(g, r))},
	}
}
