package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Elastic jobs: the TrainingJob workflow scales a running elastic gang and replaces a
// lost replica of one through these activities, which need a backend that implements
// backend.Elastic.

// ScaleGangInput is the job, already scaled (backend.ScaledJob), and the attempt whose
// gang to bring to its replica count.
type ScaleGangInput struct {
	Job    schemas.TrainingJob `json:"job"`
	Params backend.GangParams  `json:"params"`
}

// ReplaceReplicaInput names the replica to replace in the attempt of the job.
type ReplaceReplicaInput struct {
	Job     schemas.TrainingJob `json:"job"`
	Params  backend.GangParams  `json:"params"`
	Replica string              `json:"replica"`
}

// ElasticResult is the gang's state once the change is made.
type ElasticResult struct {
	Replicas []schemas.ReplicaStatus `json:"replicas"`
}

// ErrTypeNotElastic is the error type of a scale or replacement asked of a backend that
// cannot change a running gang.
const ErrTypeNotElastic = "NotElastic"

// ScaleGang creates the replicas the scaled job has and the gang lacks, and removes the
// ones it no longer has; the others keep running.
func (a *JobActivities) ScaleGang(ctx context.Context, in ScaleGangInput) (ElasticResult, error) {
	defer keepAlive(ctx)()
	el, gang, err := a.elasticGang(&in.Job, in.Params)
	if err != nil {
		return ElasticResult{}, err
	}
	if err := el.ScaleGang(ctx, gang); err != nil {
		return ElasticResult{}, backendError(err, "scale "+gang.ID())
	}
	return a.observeElastic(ctx, gang.GangRef)
}

// ReplaceReplica replaces one replica of the gang (same name, new pod or process); the
// others keep running.
func (a *JobActivities) ReplaceReplica(ctx context.Context, in ReplaceReplicaInput) (ElasticResult, error) {
	defer keepAlive(ctx)()
	el, gang, err := a.elasticGang(&in.Job, in.Params)
	if err != nil {
		return ElasticResult{}, err
	}
	if err := el.ReplaceReplica(ctx, gang, in.Replica); err != nil {
		return ElasticResult{}, backendError(err, "replace "+in.Replica)
	}
	return a.observeElastic(ctx, gang.GangRef)
}

func (a *JobActivities) elasticGang(job *schemas.TrainingJob, p backend.GangParams) (backend.Elastic, backend.GangSpec, error) {
	el, ok := a.Backend.(backend.Elastic)
	if !ok {
		msg := fmt.Sprintf("the %s backend cannot change a running gang", a.Backend.Name())
		return nil, backend.GangSpec{}, temporal.NewNonRetryableApplicationError(msg, ErrTypeNotElastic, nil)
	}
	gang, err := backend.BuildGang(job, p)
	if err != nil {
		return nil, gang, invalidSpec(err)
	}
	return el, gang, nil
}

func (a *JobActivities) observeElastic(ctx context.Context, ref backend.GangRef) (ElasticResult, error) {
	st, err := a.Backend.Observe(ctx, ref)
	if err != nil {
		return ElasticResult{}, backendError(err, "observe "+ref.ID())
	}
	return ElasticResult{Replicas: st.Replicas}, nil
}
