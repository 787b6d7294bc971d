package service

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Quotas is the workspace quota service: one QuotaWorkflow per workspace that has a
// quota, started by the first Set.
type Quotas struct{ *temporalBase }

// Set sets a workspace's quota; queued jobs that now fit are admitted at once. Invalid
// limits are a schemas.ErrorList naming each field.
func (s *Quotas) Set(ctx context.Context, ws string, q api.Quota) (api.Quota, error) {
	limits, errs := quotaLimits(q)
	if len(errs) > 0 {
		return api.Quota{}, errs
	}
	start := workflows.QuotaStart(ws)
	_, err := s.tc.SignalWithStartWorkflow(ctx, start.ID, workflows.SignalQuotaSet, limits,
		start.ClientOptions(s.taskQueue), start.WorkflowType, start.Input)
	if err != nil {
		return api.Quota{}, fmt.Errorf("set quota: %w", err)
	}
	return q, nil
}

// Get answers a workspace's quota and use; a workspace without a quota has no limits
// and nothing counted.
func (s *Quotas) Get(ctx context.Context, ws string) (api.QuotaStatus, error) {
	var view workflows.QuotaView
	v, err := s.tc.QueryWorkflow(ctx, workflows.QuotaWorkflowID(ws), "", workflows.QueryQuota)
	switch {
	case isNotFound(err):
		view = workflows.QuotaView{Workspace: ws}
	case err != nil:
		return api.QuotaStatus{}, fmt.Errorf("get quota: %w", err)
	default:
		if err := v.Get(&view); err != nil {
			return api.QuotaStatus{}, fmt.Errorf("get quota: %w", err)
		}
	}
	return quotaStatus(view), nil
}

// Upper bounds of a workspace quota's limits: far above any cluster's, and low enough
// that the quota workflow counts them exactly in an int64 of GPUs, millicores and bytes
// (Quantity.MilliValue of "1e400" is 0).
var (
	maxQuotaGPU    int64 = 1 << 40
	maxQuotaCPU          = resource.MustParse("1G")  // 10^9 cores
	maxQuotaMemory       = resource.MustParse("1Ei") // 2^60 bytes
)

func quotaLimits(q api.Quota) (workflows.QuotaLimits, schemas.ErrorList) {
	var l workflows.QuotaLimits
	var errs schemas.ErrorList
	if q.GPU != nil {
		switch {
		case *q.GPU < 0:
			errs = append(errs, schemas.Invalid(schemas.NewPath("gpu"), "must be >= 0"))
		case *q.GPU > maxQuotaGPU:
			errs = append(errs, schemas.Invalid(schemas.NewPath("gpu"), "must be at most %d", maxQuotaGPU))
		}
		l.GPU = q.GPU
	}
	parse := func(field, s string, limit resource.Quantity, milli bool) *int64 {
		if s == "" {
			return nil
		}
		v, err := resource.ParseQuantity(s)
		switch {
		case err != nil || v.Sign() < 0:
			errs = append(errs, schemas.Invalid(schemas.NewPath(field), "must be a non-negative quantity such as \"64\", \"500m\" or \"256Gi\""))
			return nil
		case v.Cmp(limit) > 0:
			errs = append(errs, schemas.Invalid(schemas.NewPath(field), "must be at most %s", limit.String()))
			return nil
		}
		n := v.Value()
		if milli {
			n = v.MilliValue()
		}
		return &n
	}
	l.MilliCPU = parse("cpu", q.CPU, maxQuotaCPU, true)
	l.MemoryBytes = parse("memory", q.Memory, maxQuotaMemory, false)
	return l, errs
}

func quotaStatus(v workflows.QuotaView) api.QuotaStatus {
	st := api.QuotaStatus{Workspace: v.Workspace, Used: usage(v.Used), Admitted: []api.QuotaJob{}, Queue: []api.QuotaJob{}}
	st.Limits.GPU = v.Limits.GPU
	if v.Limits.MilliCPU != nil {
		st.Limits.CPU = resource.NewMilliQuantity(*v.Limits.MilliCPU, resource.DecimalSI).String()
	}
	if v.Limits.MemoryBytes != nil {
		st.Limits.Memory = resource.NewQuantity(*v.Limits.MemoryBytes, resource.BinarySI).String()
	}
	entry := func(e workflows.QuotaEntry) api.QuotaJob {
		return api.QuotaJob{Job: jobName(v.Workspace, e.JobID), Priority: e.Priority, Resources: usage(e.Resources), Since: e.Since}
	}
	for _, e := range v.Admitted {
		st.Admitted = append(st.Admitted, entry(e))
	}
	for _, e := range v.Queue {
		st.Queue = append(st.Queue, entry(e))
	}
	return st
}

func usage(a activities.QuotaAmounts) api.QuotaUsage {
	return api.QuotaUsage{
		GPU:    a.GPU,
		CPU:    resource.NewMilliQuantity(a.MilliCPU, resource.DecimalSI).String(),
		Memory: resource.NewQuantity(a.MemoryBytes, resource.BinarySI).String(),
	}
}

// jobName is the job name in a job workflow id of workspace ws.
func jobName(ws, id string) string {
	if name, ok := strings.CutPrefix(id, workflows.JobWorkflowID(ws, "")); ok {
		return name
	}
	return id
}
