package api

import (
	"maps"
	"slices"
	"time"
)

// Quota is a workspace's resource quota, as set by `PUT /v1/workspaces/{ws}/quota`.
// An omitted resource is unlimited. Jobs in the quota pool count against it; jobs in the
// public, spot and idle pools do not. GPU, CPU, Memory and GPUModels are the nominal
// quota: what the workspace is guaranteed. In a cohort, a workspace may use more by
// borrowing what the other members leave idle (docs/quota.md).
type Quota struct {
	// GPU is whole GPUs.
	GPU *int64 `json:"gpu,omitempty"`
	// CPU is a quantity of cores such as "64" or "500m".
	CPU string `json:"cpu,omitempty"`
	// Memory is a quantity of bytes such as "256Gi".
	Memory string `json:"memory,omitempty"`
	// GPUModels bound the GPUs of each accelerator model, by the value of the node
	// label nvidia.com/gpu.product a job's role selects (such as "NVIDIA-A100-SXM4-80GB").
	// A job's GPUs count against GPU and against the model it selects.
	GPUModels map[string]int64 `json:"gpuModels,omitempty"`
	// Cohort joins the workspace to a cohort (a DNS label): the members share their
	// idle nominal quota. A workspace changes cohort only while no job of it is
	// admitted or queued.
	Cohort string `json:"cohort,omitempty"`
	// BorrowingLimit bounds what the workspace uses beyond its nominal quota, per
	// resource (default: unbounded). Only in a cohort.
	BorrowingLimit *QuotaLimit `json:"borrowingLimit,omitempty"`
	// LendingLimit bounds how much of its nominal quota the other members may use,
	// per resource (default: all of it). The rest is the workspace's alone.
	LendingLimit *QuotaLimit `json:"lendingLimit,omitempty"`
	// Weight is the workspace's fair-sharing weight in its cohort, 1 to 1000
	// (default 1): idle capacity goes first to the member whose weighted dominant
	// share of borrowed capacity is lowest.
	Weight int64 `json:"weight,omitempty"`
	// Preemption says what the workspace's queued jobs may preempt.
	Preemption *QuotaPreemption `json:"preemption,omitempty"`
}

// QuotaLimit bounds amounts per resource; an omitted resource is not bounded.
type QuotaLimit struct {
	GPU       *int64           `json:"gpu,omitempty"`
	CPU       string           `json:"cpu,omitempty"`
	Memory    string           `json:"memory,omitempty"`
	GPUModels map[string]int64 `json:"gpuModels,omitempty"`
}

// QuotaPreemption is a workspace's preemption policy, named as Kueue's ClusterQueue
// preemption fields are.
type QuotaPreemption struct {
	// ReclaimWithinCohort: whether a job within the workspace's nominal quota
	// preempts jobs of other members that borrow: "Any" (default), "LowerPriority"
	// (only jobs of lower priority) or "Never".
	ReclaimWithinCohort string `json:"reclaimWithinCohort,omitempty"`
	// WithinWorkspace: whether a job preempts the workspace's own jobs of lower
	// priority: "Never" (default) or "LowerPriority".
	WithinWorkspace string `json:"withinWorkspace,omitempty"`
}

// QuotaUsage is an amount of resources in quota units.
type QuotaUsage struct {
	GPU       int64            `json:"gpu"`
	CPU       string           `json:"cpu"`
	Memory    string           `json:"memory"`
	GPUModels map[string]int64 `json:"gpuModels,omitempty"`
}

// QuotaJob is a job admitted against, or queued for, the quota.
type QuotaJob struct {
	Job       string     `json:"job"`
	Priority  int32      `json:"priority,omitempty"`
	Resources QuotaUsage `json:"resources"`
	// Since is when the job was admitted (admitted) or asked (queued).
	Since time.Time `json:"since"`
	// Borrowing: admitted beyond the workspace's nominal quota, on capacity the
	// cohort's other members leave idle; such a job may be preempted when they need it.
	Borrowing bool `json:"borrowing,omitempty"`
	// Preempting, on an admitted job: it is being preempted, and releases its share
	// once stopped.
	Preempting *QuotaPreemptionInfo `json:"preempting,omitempty"`
	// Waiting for, on a queued job: the jobs it preempts (the workspace's own by
	// name, another workspace's as "1 job(s) of workspace W"); it is admitted once
	// they have stopped.
	WaitingFor []string `json:"waitingFor,omitempty"`
}

// QuotaPreemptionInfo says who takes a preempted job's capacity and why.
type QuotaPreemptionInfo struct {
	// By is the job that takes the capacity when it is of the same workspace (another
	// workspace's job names are not shown); Workspace is its workspace.
	By        string `json:"by,omitempty"`
	Workspace string `json:"workspace"`
	// Reason is Reclaimed or PreemptedByPriority.
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// QuotaStatus is a workspace's quota and its use.
type QuotaStatus struct {
	Workspace string     `json:"workspace"`
	Limits    Quota      `json:"limits"`
	Used      QuotaUsage `json:"used"`
	// Borrowed is what the workspace uses beyond its nominal quota; Lent, what the
	// other members of its cohort use of its nominal quota. Both are zero outside a
	// cohort.
	Borrowed QuotaUsage `json:"borrowed"`
	Lent     QuotaUsage `json:"lent"`
	Admitted []QuotaJob `json:"admitted"`
	// Queue is in admission order: priority, then arrival.
	Queue []QuotaJob `json:"queue"`
	// Cohort is the workspace's cohort, with every member's figures.
	Cohort *CohortStatus `json:"cohort,omitempty"`
}

// CohortStatus is a cohort's shared quota and its members' use of it.
type CohortStatus struct {
	Name string `json:"name"`
	// Pool is what the members lend (the sum of their lendable nominal quota), and
	// Borrowed what they use of each other's.
	Pool     QuotaUsage     `json:"pool"`
	Borrowed QuotaUsage     `json:"borrowed"`
	Members  []CohortMember `json:"members"`
}

// CohortMember is one workspace's figures in its cohort.
type CohortMember struct {
	Workspace string     `json:"workspace"`
	Nominal   QuotaUsage `json:"nominal"`
	Used      QuotaUsage `json:"used"`
	Borrowed  QuotaUsage `json:"borrowed"`
	Lent      QuotaUsage `json:"lent"`
	Weight    int64      `json:"weight"`
	// Share is the member's weighted dominant share of borrowed capacity: the
	// largest fraction of a resource's pool it borrows, over its weight.
	Share    float64 `json:"share"`
	Admitted int     `json:"admitted"`
	Queued   int     `json:"queued"`
}

// JobPriority changes the priority of a job in the quota pool, queued or admitted:
// `POST /v1/workspaces/{ws}/jobs/{name}/priority`.
type JobPriority struct {
	// Priority orders queued jobs (higher first), -1000 to 1000.
	Priority int32 `json:"priority"`
}

// GPUModelNames are the GPU models the status names anywhere (its limits, use,
// borrowed and lent figures), sorted: the rows a quota table shows after gpu.
func (st *QuotaStatus) GPUModelNames() []string {
	l := st.Limits
	models := map[string]bool{}
	for _, m := range []map[string]int64{l.GPUModels, st.Used.GPUModels, st.Borrowed.GPUModels, st.Lent.GPUModels} {
		for k := range m {
			models[k] = true
		}
	}
	for _, lim := range []*QuotaLimit{l.BorrowingLimit, l.LendingLimit} {
		if lim != nil {
			for k := range lim.GPUModels {
				models[k] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(models))
}
