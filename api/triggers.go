package api

import "github.com/opendlc/opendlc/schemas"

// TriggerList is a workspace's triggers.
type TriggerList struct {
	Items []schemas.Trigger `json:"items"`
}
