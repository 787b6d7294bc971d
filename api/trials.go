package api

import "github.com/opendlc/opendlc/schemas"

// TrialList is an experiment's trials as a resource: every trial suggested so far, by
// ID (GET /v1/workspaces/{ws}/experiments/{name}/trials).
type TrialList struct {
	// Experiment and UID name the experiment the trials belong to.
	Experiment string `json:"experiment"`
	UID        string `json:"uid"`
	// Items are the trials, by ID; only those in the phase asked for when the list was
	// filtered.
	Items []schemas.TrialStatus `json:"items"`
	// BestTrial is the ID of the experiment's best completed trial, if any.
	BestTrial *int `json:"bestTrial,omitempty"`
}
