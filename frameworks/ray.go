package frameworks

import (
	"strconv"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// PortRayGCS names the port of the Ray head's GCS server (ray start --head --port).
const PortRayGCS = "ray-gcs"

// DefaultRayGCSPort is Ray's own default GCS port. The backend chooses the number of
// PortRayGCS; DLC_RAY_PORT tells the head which one it got.
const DefaultRayGCSPort = 6379

// Ray starts a Ray cluster: the head (role "head", exactly one) runs
//
//	ray start --head --port="$DLC_RAY_PORT" --block   # plus the driver, if any
//
// and workers run ray start --address="$RAY_ADDRESS" --block. A driver anywhere in the
// gang calls ray.init(), which reads RAY_ADDRESS. (RAY_ADDRESS is the GCS address, not
// the dashboard's http:// address that ray job submit expects.)
type Ray struct{}

// Name returns "ray".
func (Ray) Name() schemas.Framework { return schemas.FrameworkRay }

// PortNames returns the GCS port.
func (Ray) PortNames() []string { return []string{PortRayGCS} }

// rayHead is the role of the head node.
const rayHead = "head"

// Env returns RAY_ADDRESS (head-0's host:GCS port), RAY_HEAD_IP (head-0's host),
// DLC_RAY_PORT (the GCS port) and DLC_RAY_HEAD ("true" on the head, else "false").
func (Ray) Env(_ backend.GangSpec, r backend.ReplicaSpec, ep Endpoints) []schemas.EnvVar {
	host := ep.Host(rayHead, 0)
	port := strconv.Itoa(ep.Port(PortRayGCS))
	return []schemas.EnvVar{
		{Name: "RAY_ADDRESS", Value: host + ":" + port},
		{Name: "RAY_HEAD_IP", Value: host},
		{Name: "DLC_RAY_PORT", Value: port},
		{Name: "DLC_RAY_HEAD", Value: strconv.FormatBool(r.Role == rayHead && r.Index == 0)},
	}
}

// Outcome lets the head decide, both ways: Ray survives the loss of worker nodes, so a
// failed worker does not fail the job while the head runs.
func (Ray) Outcome(replicas []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	return leaderDecides(replicas, rayHead, 0, false)
}
