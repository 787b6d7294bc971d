package activities

import (
	"fmt"

	"github.com/opendlc/opendlc/schemas"
)

// RunOutcome is how a pipeline run's steps ended, which its onExit steps read as
// ${pipeline.status}, ${pipeline.failedStep} and ${pipeline.message}.
type RunOutcome struct {
	Status     schemas.PipelinePhase `json:"status"`
	FailedStep string                `json:"failedStep,omitempty"`
	Message    string                `json:"message,omitempty"`
}

// value resolves a ${pipeline.<outcome>} reference; o is nil outside onExit steps.
func (o *RunOutcome) value(r schemas.TemplateRef) (string, error) {
	if o == nil {
		return "", fmt.Errorf("%s: the run's outcome is known only in onExit steps", r)
	}
	switch r.Name {
	case schemas.PipelineRefStatus:
		return string(o.Status), nil
	case schemas.PipelineRefFailedStep:
		return o.FailedStep, nil
	case schemas.PipelineRefMessage:
		return o.Message, nil
	}
	return "", fmt.Errorf("%s: not available in a pipeline", r)
}
