package server

import (
	"github.com/opendlc/opendlc/schemas"
)

// validateDocument decodes a document of any kind (schemas.Decode dispatches on its
// kind) and validates it, as the route that creates a document of that kind does
// (decodeDoc). Errors are field-path errors (schemas.ErrorList) or a problem with the
// document as a whole.
func validateDocument(body []byte) error {
	_, err := schemas.DecodeValid(body, schemas.Decode)
	return err
}
