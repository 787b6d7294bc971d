package triggers

import (
	"errors"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/service"
)

// experimentAction is the Experiment a trigger with an experiment action starts for an
// event: named runName in the trigger's workspace, with its labels, and the trigger's
// params substituted in its trial template (schemas.TriggerExperimentSpec). A document
// that does not validate is a permanent failure.
func experimentAction(t *schemas.Trigger, runName string, labels, params map[string]string) (*schemas.Experiment, error) {
	spec, errs := schemas.TriggerExperimentSpec(t.Spec.Action.Experiment, params, schemas.NewPath("spec"))
	if len(errs) > 0 {
		return nil, permanent("%w", errors.Join(errs...))
	}
	exp := &schemas.Experiment{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindExperiment,
		Metadata:   schemas.ObjectMeta{Name: runName, Workspace: t.Metadata.Workspace, Labels: labels},
		Spec:       spec,
	}
	exp.Default()
	if errs := exp.Validate(); len(errs) > 0 {
		return nil, permanent("the experiment is invalid: %v", errs)
	}
	return exp, nil
}

// isInvalid reports whether a start was refused for the document itself (the storage
// check's field errors, or the service's ErrInvalid): retrying cannot cure it.
func isInvalid(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[schemas.ErrorList](err); ok {
		return true
	}
	return errors.Is(err, service.ErrInvalid) || errors.Is(err, service.ErrInvalidObject)
}
