package api

import "github.com/opendlc/opendlc/schemas"

// PipelineTemplateList is a workspace's stored pipeline templates.
type PipelineTemplateList struct {
	Items []schemas.StoredPipelineTemplate `json:"items"`
}

// TemplateRunRequest is the body of the call that runs a stored pipeline template.
type TemplateRunRequest struct {
	// Name names the run (required).
	Name string `json:"name"`
	// Params are parameter values; the template's defaults fill in the others.
	Params map[string]string `json:"params,omitempty"`
}
