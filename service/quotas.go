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
// limits are a schemas.ErrorList naming each field. Joining a cohort, leaving it or
// changing it is refused (ErrConflict, field cohort) while a job of the workspace is
// admitted or queued.
func (s *Quotas) Set(ctx context.Context, ws string, q api.Quota) (api.Quota, error) {
	limits, errs := quotaLimits(q)
	if len(errs) > 0 {
		return api.Quota{}, errs
	}
	own, err := s.view(ctx, workflows.QuotaWorkflowID(ws), workflows.QuotaView{Workspace: ws})
	if err != nil {
		return api.Quota{}, fmt.Errorf("set quota: %w", err)
	}
	old := own.Limits.Cohort
	if old != limits.Cohort {
		held := len(own.Admitted) + len(own.Queue)
		if old != "" {
			cohort, err := s.view(ctx, workflows.CohortQuotaWorkflowID(old), workflows.QuotaView{Cohort: old})
			if err != nil {
				return api.Quota{}, fmt.Errorf("set quota: %w", err)
			}
			for _, m := range cohort.Members {
				if m.Workspace == ws {
					held += len(m.Admitted) + len(m.Queue)
				}
			}
		}
		if held > 0 {
			msg := fmt.Sprintf("workspace %s has %d job(s) admitted or queued; it changes cohort (from %q to %q) once they have ended", ws, held, old, limits.Cohort)
			return api.Quota{}, &Error{Kind: ErrConflict, Message: msg, Fields: []schemas.FieldError{{Field: "cohort", Detail: msg}}}
		}
	}
	// The cohort learns of its member before the workspace's quota sends jobs there,
	// and the old cohort lets it go only after the workspace's quota stopped doing so.
	if limits.Cohort != "" {
		start := workflows.CohortQuotaStart(limits.Cohort)
		if _, err := s.tc.SignalWithStartWorkflow(ctx, start.ID, workflows.SignalQuotaMember,
			workflows.QuotaMemberSet{Workspace: ws, Limits: limits},
			start.ClientOptions(s.taskQueue), start.WorkflowType, start.Input); err != nil {
			return api.Quota{}, fmt.Errorf("set quota: %w", err)
		}
	}
	start := workflows.QuotaStart(ws)
	if _, err := s.tc.SignalWithStartWorkflow(ctx, start.ID, workflows.SignalQuotaSet, limits,
		start.ClientOptions(s.taskQueue), start.WorkflowType, start.Input); err != nil {
		return api.Quota{}, fmt.Errorf("set quota: %w", err)
	}
	if old != "" && old != limits.Cohort {
		err := s.tc.SignalWorkflow(ctx, workflows.CohortQuotaWorkflowID(old), "", workflows.SignalQuotaMember,
			workflows.QuotaMemberSet{Workspace: ws, Remove: true})
		if err != nil && !isNotFound(err) {
			return api.Quota{}, fmt.Errorf("set quota: leave cohort %s: %w", old, err)
		}
	}
	return q, nil
}

// view queries a quota workflow; one that does not exist is empty.
func (s *Quotas) view(ctx context.Context, id string, empty workflows.QuotaView) (workflows.QuotaView, error) {
	v, err := s.tc.QueryWorkflow(ctx, id, "", workflows.QueryQuota)
	switch {
	case isNotFound(err):
		return empty, nil
	case err != nil:
		return workflows.QuotaView{}, err
	}
	var view workflows.QuotaView
	if err := v.Get(&view); err != nil {
		return workflows.QuotaView{}, err
	}
	return view, nil
}

// Get answers a workspace's quota and use; a workspace without a quota has no limits
// and nothing counted. A workspace in a cohort is answered from the cohort's quota,
// with every member's figures.
func (s *Quotas) Get(ctx context.Context, ws string) (api.QuotaStatus, error) {
	own, err := s.view(ctx, workflows.QuotaWorkflowID(ws), workflows.QuotaView{Workspace: ws})
	if err != nil {
		return api.QuotaStatus{}, fmt.Errorf("get quota: %w", err)
	}
	c := own.Limits.Cohort
	if c == "" {
		return quotaStatus(own), nil
	}
	cohort, err := s.view(ctx, workflows.CohortQuotaWorkflowID(c), workflows.QuotaView{Cohort: c})
	if err != nil {
		return api.QuotaStatus{}, fmt.Errorf("get quota: %w", err)
	}
	return cohortStatus(ws, own, cohort), nil
}

// ledgerOf is the quota workflow that holds the workspace's jobs: its cohort's, or its
// own.
func (s *Quotas) ledgerOf(ctx context.Context, ws string) (string, workflows.QuotaView, error) {
	own, err := s.view(ctx, workflows.QuotaWorkflowID(ws), workflows.QuotaView{Workspace: ws})
	if err != nil || own.Limits.Cohort == "" {
		return workflows.QuotaWorkflowID(ws), own, err
	}
	c := own.Limits.Cohort
	cohort, err := s.view(ctx, workflows.CohortQuotaWorkflowID(c), workflows.QuotaView{Cohort: c})
	return workflows.CohortQuotaWorkflowID(c), cohort, err
}

// SetPriority changes the priority of a job the quota holds, queued (it moves in the
// queue) or admitted (it orders preemption). A job the quota does not hold (not in the
// quota pool, or ended) is ErrConflict.
func (s *Quotas) SetPriority(ctx context.Context, ws, name string, p api.JobPriority) (api.JobPriority, error) {
	if p.Priority < -1000 || p.Priority > 1000 {
		return api.JobPriority{}, invalid("priority: must be between -1000 and 1000", "priority", "must be between -1000 and 1000")
	}
	jobID := workflows.JobWorkflowID(ws, name)
	if _, err := s.tc.DescribeWorkflowExecution(ctx, jobID, ""); err != nil {
		if isNotFound(err) {
			return api.JobPriority{}, notFound("job", ws, name)
		}
		return api.JobPriority{}, fmt.Errorf("set priority: %w", err)
	}
	id, view, err := s.ledgerOf(ctx, ws)
	if err != nil {
		return api.JobPriority{}, fmt.Errorf("set priority: %w", err)
	}
	held := false
	for _, e := range append(append(append([]workflows.QuotaEntry{}, view.Admitted...), view.Queue...), memberEntries(view, ws)...) {
		held = held || e.JobID == jobID
	}
	if !held {
		return api.JobPriority{}, &Error{Kind: ErrConflict,
			Message: fmt.Sprintf("job %s is neither queued nor admitted in workspace %s's quota (only a job of the quota pool that has not ended has a place there)", name, ws)}
	}
	// The job keeps it for when it asks again (after a preemption); the quota
	// reorders its queue now.
	if err := s.tc.SignalWorkflow(ctx, jobID, "", workflows.SignalJobPriority, p.Priority); err != nil {
		return api.JobPriority{}, fmt.Errorf("set priority: %w", err)
	}
	if err := s.tc.SignalWorkflow(ctx, id, "", workflows.SignalQuotaPriority,
		workflows.QuotaPriority{JobID: jobID, Priority: p.Priority}); err != nil {
		return api.JobPriority{}, fmt.Errorf("set priority: %w", err)
	}
	return p, nil
}

// memberEntries are the admitted and queued jobs of workspace ws in a cohort's view.
func memberEntries(v workflows.QuotaView, ws string) []workflows.QuotaEntry {
	var out []workflows.QuotaEntry
	for _, m := range v.Members {
		if m.Workspace == ws {
			out = append(append(out, m.Admitted...), m.Queue...)
		}
	}
	return out
}

// Upper bounds of a workspace quota's limits: far above any cluster's, and low enough
// that the quota workflow counts them exactly in an int64 of GPUs, millicores and bytes
// (Quantity.MilliValue of "1e400" is 0).
var (
	maxQuotaGPU    int64 = 1 << 40
	maxQuotaCPU          = resource.MustParse("1G")  // 10^9 cores
	maxQuotaMemory       = resource.MustParse("1Ei") // 2^60 bytes
)

// Bounds of the sharing settings.
const (
	maxQuotaWeight = 1000
	maxGPUModels   = 32
)

func quotaLimits(q api.Quota) (workflows.QuotaLimits, schemas.ErrorList) {
	var l workflows.QuotaLimits
	var errs schemas.ErrorList
	caps := func(path schemas.Path, gpu *int64, cpu, memory string, models map[string]int64) workflows.QuotaCaps {
		var c workflows.QuotaCaps
		if gpu != nil {
			switch {
			case *gpu < 0:
				errs = append(errs, schemas.Invalid(path.Child("gpu"), "must be >= 0"))
			case *gpu > maxQuotaGPU:
				errs = append(errs, schemas.Invalid(path.Child("gpu"), "must be at most %d", maxQuotaGPU))
			}
			c.GPU = gpu
		}
		parse := func(field, s string, limit resource.Quantity, milli bool) *int64 {
			if s == "" {
				return nil
			}
			v, err := resource.ParseQuantity(s)
			switch {
			case err != nil || v.Sign() < 0:
				errs = append(errs, schemas.Invalid(path.Child(field), "must be a non-negative quantity such as \"64\", \"500m\" or \"256Gi\""))
				return nil
			case v.Cmp(limit) > 0:
				errs = append(errs, schemas.Invalid(path.Child(field), "must be at most %s", limit.String()))
				return nil
			}
			n := v.Value()
			if milli {
				n = v.MilliValue()
			}
			return &n
		}
		c.MilliCPU = parse("cpu", cpu, maxQuotaCPU, true)
		c.MemoryBytes = parse("memory", memory, maxQuotaMemory, false)
		if len(models) > maxGPUModels {
			errs = append(errs, schemas.Invalid(path.Child("gpuModels"), "at most %d models", maxGPUModels))
		}
		for model, n := range models {
			mp := path.Child("gpuModels").Key(model)
			switch {
			case model == "":
				errs = append(errs, schemas.Invalid(mp, "must name a model (the value of the node label %s)", workflows.GPUModelLabel))
			case schemas.CheckLabelFilter(workflows.GPUModelLabel+"="+model) != "":
				errs = append(errs, schemas.Invalid(mp, "model %s", schemas.CheckLabelFilter(workflows.GPUModelLabel+"="+model)))
			case n < 0:
				errs = append(errs, schemas.Invalid(mp, "must be >= 0"))
			case n > maxQuotaGPU:
				errs = append(errs, schemas.Invalid(mp, "must be at most %d", maxQuotaGPU))
			}
		}
		if len(models) > 0 {
			c.GPUModels = models
		}
		return c
	}
	nominal := caps("", q.GPU, q.CPU, q.Memory, q.GPUModels)
	l.GPU, l.MilliCPU, l.MemoryBytes, l.GPUModels = nominal.GPU, nominal.MilliCPU, nominal.MemoryBytes, nominal.GPUModels
	if q.Cohort != "" {
		if msg := schemas.CheckWorkspaceName(q.Cohort); msg != "" {
			errs = append(errs, schemas.Invalid(schemas.NewPath("cohort"), "%s", strings.Replace(msg, "workspace name", "cohort name", 1)))
		}
		l.Cohort = q.Cohort
	}
	if b := q.BorrowingLimit; b != nil {
		if q.Cohort == "" {
			errs = append(errs, schemas.Invalid(schemas.NewPath("borrowingLimit"), "needs a cohort: a workspace outside any cohort cannot borrow"))
		}
		c := caps(schemas.NewPath("borrowingLimit"), b.GPU, b.CPU, b.Memory, b.GPUModels)
		l.Borrowing = &c
	}
	if lend := q.LendingLimit; lend != nil {
		if q.Cohort == "" {
			errs = append(errs, schemas.Invalid(schemas.NewPath("lendingLimit"), "needs a cohort: a workspace outside any cohort lends nothing"))
		}
		p := schemas.NewPath("lendingLimit")
		c := caps(p, lend.GPU, lend.CPU, lend.Memory, lend.GPUModels)
		above := func(field string, v, n *int64) {
			switch {
			case v == nil:
			case n == nil:
				errs = append(errs, schemas.Invalid(p.Child(field), "needs a nominal %s quota to lend from", field))
			case *v > *n:
				errs = append(errs, schemas.Invalid(p.Child(field), "must be at most the nominal quota"))
			}
		}
		above("gpu", c.GPU, l.GPU)
		above("cpu", c.MilliCPU, l.MilliCPU)
		above("memory", c.MemoryBytes, l.MemoryBytes)
		for model, n := range c.GPUModels {
			nominal, ok := l.GPUModels[model]
			if !ok || n > nominal {
				errs = append(errs, schemas.Invalid(p.Child("gpuModels").Key(model), "must be at most the nominal quota of the model"))
			}
		}
		l.Lending = &c
	}
	switch {
	case q.Weight < 0 || q.Weight > maxQuotaWeight:
		errs = append(errs, schemas.Invalid(schemas.NewPath("weight"), "must be between 1 and %d (0: the default, 1)", maxQuotaWeight))
	case q.Weight > 0 && q.Cohort == "":
		errs = append(errs, schemas.Invalid(schemas.NewPath("weight"), "needs a cohort: the weight shares a cohort's idle quota"))
	}
	l.Weight = q.Weight
	if p := q.Preemption; p != nil {
		switch p.ReclaimWithinCohort {
		case "", workflows.PreemptAny, workflows.PreemptLowerPriority, workflows.PreemptNever:
		default:
			errs = append(errs, schemas.Invalid(schemas.NewPath("preemption", "reclaimWithinCohort"), "must be Any, LowerPriority or Never"))
		}
		switch p.WithinWorkspace {
		case "", workflows.PreemptLowerPriority, workflows.PreemptNever:
		default:
			errs = append(errs, schemas.Invalid(schemas.NewPath("preemption", "withinWorkspace"), "must be LowerPriority or Never"))
		}
		l.Preemption = workflows.QuotaPreemption{ReclaimWithinCohort: p.ReclaimWithinCohort, WithinWorkspace: p.WithinWorkspace}
	}
	return l, errs
}

// apiQuota is the limits as the API writes them.
func apiQuota(l workflows.QuotaLimits) api.Quota {
	capsOut := func(gpu, cpu, memory *int64, models map[string]int64) api.QuotaLimit {
		c := api.QuotaLimit{GPU: gpu, GPUModels: models}
		if cpu != nil {
			c.CPU = resource.NewMilliQuantity(*cpu, resource.DecimalSI).String()
		}
		if memory != nil {
			c.Memory = resource.NewQuantity(*memory, resource.BinarySI).String()
		}
		return c
	}
	n := capsOut(l.GPU, l.MilliCPU, l.MemoryBytes, l.GPUModels)
	q := api.Quota{GPU: n.GPU, CPU: n.CPU, Memory: n.Memory, GPUModels: n.GPUModels, Cohort: l.Cohort, Weight: l.Weight}
	if b := l.Borrowing; b != nil {
		c := capsOut(b.GPU, b.MilliCPU, b.MemoryBytes, b.GPUModels)
		q.BorrowingLimit = &c
	}
	if b := l.Lending; b != nil {
		c := capsOut(b.GPU, b.MilliCPU, b.MemoryBytes, b.GPUModels)
		q.LendingLimit = &c
	}
	if p := l.Preemption; p != (workflows.QuotaPreemption{}) {
		q.Preemption = &api.QuotaPreemption{ReclaimWithinCohort: p.ReclaimWithinCohort, WithinWorkspace: p.WithinWorkspace}
	}
	return q
}

func quotaEntry(ws string, e workflows.QuotaEntry) api.QuotaJob {
	j := api.QuotaJob{Job: jobName(ws, e.JobID), Priority: e.Priority, Resources: usage(e.Resources), Since: e.Since, Borrowing: e.Borrowing}
	// Another workspace's jobs are not named: their names are that tenant's.
	if ev := e.Evicting; ev != nil {
		j.Preempting = &api.QuotaPreemptionInfo{Workspace: ev.ByWorkspace, Reason: ev.Reason, Since: ev.Since}
		if ev.ByWorkspace == ws {
			j.Preempting.By = jobName(ws, ev.By)
		}
	}
	for _, v := range e.Victims {
		j.WaitingFor = append(j.WaitingFor, workflows.DescribeJobs(ws, []string{v}))
	}
	return j
}

func quotaStatus(v workflows.QuotaView) api.QuotaStatus {
	st := api.QuotaStatus{Workspace: v.Workspace, Limits: apiQuota(v.Limits), Used: usage(v.Used),
		Borrowed: usage(workflows.Amounts{}), Lent: usage(workflows.Amounts{}),
		Admitted: []api.QuotaJob{}, Queue: []api.QuotaJob{}}
	for _, e := range v.Admitted {
		st.Admitted = append(st.Admitted, quotaEntry(v.Workspace, e))
	}
	for _, e := range v.Queue {
		st.Queue = append(st.Queue, quotaEntry(v.Workspace, e))
	}
	return st
}

// cohortStatus is workspace ws's status in its cohort: its own jobs and figures, and
// every member's figures. own is the workspace's own quota (its limits, and jobs it
// admitted before it joined, if any drain there).
func cohortStatus(ws string, own, cohort workflows.QuotaView) api.QuotaStatus {
	st := quotaStatus(own)
	pool, figures := workflows.QuotaFigures(cohort)
	cs := &api.CohortStatus{Name: own.Limits.Cohort, Pool: usage(pool), Members: []api.CohortMember{}}
	var borrowed workflows.Amounts
	for i, f := range figures {
		m := cohort.Members[i]
		borrowed = borrowed.Add(f.Borrowed)
		weight := m.Limits.Weight
		if weight == 0 {
			weight = 1
		}
		cs.Members = append(cs.Members, api.CohortMember{
			Workspace: f.Workspace, Nominal: usage(f.Nominal), Used: usage(f.Used), Borrowed: usage(f.Borrowed), Lent: usage(f.Lent),
			Weight: weight, Share: f.Share, Admitted: len(m.Admitted), Queued: len(m.Queue),
		})
		if m.Workspace != ws {
			continue
		}
		st.Used, st.Borrowed, st.Lent = usage(own.Used.Add(f.Used)), usage(f.Borrowed), usage(f.Lent)
		for _, e := range m.Admitted {
			st.Admitted = append(st.Admitted, quotaEntry(ws, e))
		}
		for _, e := range m.Queue {
			st.Queue = append(st.Queue, quotaEntry(ws, e))
		}
	}
	cs.Borrowed = usage(borrowed)
	st.Cohort = cs
	return st
}

func usage(a activities.QuotaAmounts) api.QuotaUsage {
	return api.QuotaUsage{
		GPU:       a.GPU,
		CPU:       resource.NewMilliQuantity(a.MilliCPU, resource.DecimalSI).String(),
		Memory:    resource.NewQuantity(a.MemoryBytes, resource.BinarySI).String(),
		GPUModels: a.GPUModels,
	}
}

// jobName is the job name in a job workflow id of workspace ws.
func jobName(ws, id string) string {
	if name, ok := strings.CutPrefix(id, workflows.JobWorkflowID(ws, "")); ok {
		return name
	}
	return id
}
