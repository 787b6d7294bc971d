package api

// RedriveRequest bounds a redrive of a notification rule's dead letters
// (POST /v1/workspaces/{ws}/notificationrules/{name}/redrive).
type RedriveRequest struct {
	// Limit is the most dead letters queued by this request, from 1 to 1000; 0 means
	// 1000.
	Limit int `json:"limit,omitempty" jsonschema:"minimum=0,maximum=1000"`
	// Since, an RFC 3339 time, skips the dead letters written before it.
	Since string `json:"since,omitempty"`
}

// RedriveResult says which of a rule's dead letters a redrive queued for delivery.
type RedriveResult struct {
	// Queued are the DLC_NOTIFY sequences of the dead letters queued by this request;
	// the dispatcher delivers each once, through the rule's current target.
	Queued []uint64 `json:"queued"`
	// AlreadyQueued counts the dead letters an earlier redrive queued: they are not
	// queued again.
	AlreadyQueued int `json:"alreadyQueued"`
	// More is set when Limit stopped the scan before the last dead letter.
	More bool `json:"more,omitempty"`
}
