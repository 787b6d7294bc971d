package backend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/opendlc/opendlc/schemas"
)

// Elastic is implemented by backends that can change a running gang one replica at a
// time, for elastic PyTorch jobs (spec.elastic): torchrun's c10d rendezvous lets nodes
// join and leave a running job, so the other replicas keep running (same pod, same
// process) while one is added, removed or replaced. Both methods are idempotent.
type Elastic interface {
	// ScaleGang makes a launched gang's replicas those of spec: replicas of spec the
	// gang lacks are created, replicas the gang has that spec lacks are stopped and
	// removed, and every other replica is left as it is. spec is the gang's spec with
	// another replica count (BuildGang of the scaled job, same attempt).
	ScaleGang(ctx context.Context, spec GangSpec) error
	// ReplaceReplica replaces the named replica of a launched gang: whatever is left
	// of it is removed and a new one, with the same name and rank slot, is created
	// from spec. The other replicas are left as they are.
	ReplaceReplica(ctx context.Context, spec GangSpec, replica string) error
}

// ElasticRole is the role whose replica count an elastic job scales: "worker" when the
// job has one, else its only role; "" when neither (the job cannot be scaled).
func ElasticRole(spec *schemas.TrainingJobSpec) string {
	if _, ok := spec.Roles["worker"]; ok {
		return "worker"
	}
	if len(spec.Roles) == 1 {
		for name := range spec.Roles {
			return name
		}
	}
	return ""
}

// ScaledJob returns a copy of job whose elastic role has the replicas that bring the
// job's total to total; the job itself is not changed. It fails, naming the field
// replicas, when the job is not elastic or total does not lie within
// [minReplicas, maxReplicas].
func ScaledJob(job *schemas.TrainingJob, total int32) (schemas.TrainingJob, error) {
	out := *job
	spec := &job.Spec
	e := spec.Elastic
	if e == nil {
		return out, errors.New("replicas: the job is not elastic (it has no spec.elastic)")
	}
	if total < e.MinReplicas || total > e.MaxReplicas {
		return out, fmt.Errorf("replicas: %d is outside spec.elastic [minReplicas %d, maxReplicas %d]", total, e.MinReplicas, e.MaxReplicas)
	}
	role := ElasticRole(spec)
	if role == "" {
		return out, errors.New("replicas: the job has no role named worker and more than one role, so none can be scaled")
	}
	others := int32(spec.TotalReplicas()) - spec.Roles[role].Replicas
	n := total - others
	if n < 1 {
		return out, fmt.Errorf("replicas: %d leaves role %s no replica (the other roles have %d)", total, role, others)
	}
	roles := maps.Clone(spec.Roles)
	r := roles[role]
	r.Replicas = n
	roles[role] = r
	out.Spec.Roles = roles
	return out, nil
}

// ReplicaNames lists the names of a gang's replicas, sorted.
func ReplicaNames(g GangSpec) []string {
	names := make([]string, 0, len(g.Replicas))
	for _, r := range g.Replicas {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return names
}
