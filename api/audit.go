package api

import (
	"time"

	"github.com/opendlc/opendlc/events"
)

// AuditRecord is one audit record of a workspace, as `GET /v1/workspaces/{ws}/audit`
// answers it: the audit event's id and time with its data (who did what, from where,
// and the answer's status).
type AuditRecord struct {
	// ID is the audit event's id.
	ID string `json:"id"`
	// Time is when the call was answered.
	Time time.Time `json:"time"`
	events.AuditData
}

// AuditList is a workspace's latest audit records, newest first.
type AuditList struct {
	Items []AuditRecord `json:"items"`
}
