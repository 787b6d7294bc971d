package api

import "time"

// Quota is a workspace's resource quota, as set by `PUT /v1/workspaces/{ws}/quota`.
// An omitted resource is unlimited. Jobs in the quota pool count against it; jobs in the
// public, spot and idle pools do not.
type Quota struct {
	// GPU is whole GPUs.
	GPU *int64 `json:"gpu,omitempty"`
	// CPU is a quantity of cores such as "64" or "500m".
	CPU string `json:"cpu,omitempty"`
	// Memory is a quantity of bytes such as "256Gi".
	Memory string `json:"memory,omitempty"`
}

// QuotaUsage is an amount of resources in quota units.
type QuotaUsage struct {
	GPU    int64  `json:"gpu"`
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
}

// QuotaJob is a job admitted against, or queued for, the quota.
type QuotaJob struct {
	Job       string     `json:"job"`
	Priority  int32      `json:"priority,omitempty"`
	Resources QuotaUsage `json:"resources"`
	// Since is when the job was admitted (admitted) or asked (queued).
	Since time.Time `json:"since"`
}

// QuotaStatus is a workspace's quota and its use.
type QuotaStatus struct {
	Workspace string     `json:"workspace"`
	Limits    Quota      `json:"limits"`
	Used      QuotaUsage `json:"used"`
	Admitted  []QuotaJob `json:"admitted"`
	// Queue is in admission order: priority, then arrival.
	Queue []QuotaJob `json:"queue"`
}
