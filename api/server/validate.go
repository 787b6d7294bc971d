package server

import (
	"github.com/opendlc/opendlc/schemas"
)

// validateDocument decodes a document of any kind (schemas.Decode dispatches on its
// kind), validates it, and checks what the schema allows but this server cannot run, as
// the route that creates a document of that kind does. Errors are field-path errors
// (schemas.ErrorList) or a problem with the document as a whole.
func validateDocument(body []byte) error {
	obj, err := schemas.DecodeValid(body, schemas.Decode)
	if err != nil {
		return err
	}
	switch o := obj.(type) {
	case *schemas.TrainingJob:
		return supported(o)
	case *schemas.Experiment:
		return experimentSupported(o)
	case *schemas.Pipeline:
		return supportedSteps(&o.Spec, schemas.NewPath("spec"))
	case *schemas.Schedule:
		return scheduleSupported(o)
	case *schemas.Trigger:
		return triggerSupported(o)
	}
	return nil
}
