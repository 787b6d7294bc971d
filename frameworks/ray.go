package frameworks

import (
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// PortRayGCS names the port of the Ray head's GCS server (ray start --head --port).
const PortRayGCS = "ray-gcs"

// DefaultRayGCSPort is Ray's own default GCS port (ray start --head without --port).
// The Kubernetes backend gives PortRayGCS this number (see DefaultPort); the local
// backend, where every gang shares 127.0.0.1, allocates a free one. DLC_RAY_PORT tells
// the head which one it got.
const DefaultRayGCSPort = 6379

// Ray starts a Ray cluster: the head (role "head", exactly one) runs
//
//	ray start --head --port="$DLC_RAY_PORT" --block   # plus the driver, if any
//
// and workers run ray start --address="$RAY_ADDRESS" --block. A driver anywhere in the
// gang calls ray.init(), which reads RAY_ADDRESS. (RAY_ADDRESS is the GCS address, not
// the dashboard's http:// address that ray job submit expects.)
//
// Bootstrap scripts written for PAI-DLC-style Ray jobs read the torch-style variables
// instead: MASTER_ADDR and MASTER_PORT (the head and its GCS port), WORLD_SIZE (the
// replicas) and RANK (0 on the head, then the other replicas in rank order), so those
// are set as well.
type Ray struct{}

// Name returns "ray".
func (Ray) Name() schemas.Framework { return schemas.FrameworkRay }

// PortNames returns the GCS port.
func (Ray) PortNames() []string { return []string{PortRayGCS} }

// rayHead is the role of the head node.
const rayHead = "head"

// Env returns RAY_ADDRESS (head-0's host:GCS port), RAY_HEAD_IP (head-0's host),
// DLC_RAY_PORT (the GCS port), DLC_RAY_HEAD ("true" on the head, else "false"), then
// MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK.
func (Ray) Env(g backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	host := ep.Host(rayHead, 0)
	port := strconv.Itoa(ep.Port(PortRayGCS))
	head := r.Role == rayHead && r.Index == 0
	// The head is rank 0 whatever RankOrder's leader is; the others keep their order.
	rank := 0
	if !head {
		for _, x := range RankOrder(g) {
			if x.Role == rayHead && x.Index == 0 {
				continue
			}
			rank++
			if x.Role == r.Role && x.Index == r.Index {
				break
			}
		}
	}
	return []schemas.EnvVar{
		{Name: "RAY_ADDRESS", Value: host + ":" + port},
		{Name: "RAY_HEAD_IP", Value: host},
		{Name: "DLC_RAY_PORT", Value: port},
		{Name: "DLC_RAY_HEAD", Value: strconv.FormatBool(head)},
		{Name: "MASTER_ADDR", Value: host},
		{Name: "MASTER_PORT", Value: port},
		{Name: "WORLD_SIZE", Value: strconv.Itoa(len(g.Replicas))},
		{Name: "RANK", Value: strconv.Itoa(rank)},
	}
}

// Outcome lets the head decide, both ways: Ray survives the loss of worker nodes, so a
// failed worker does not fail the job while the head runs.
func (Ray) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return leaderDecides(replicas, rayHead, 0, false)
}
