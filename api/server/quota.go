package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// setQuota sets a workspace's quota. The quota workflow is started if the workspace has
// none yet; queued jobs that now fit are admitted at once.
func (s *Server) setQuota(r *http.Request) (any, error) {
	ws := r.PathValue("ws")
	body, err := s.readBody(r)
	if err != nil {
		return nil, err
	}
	var q api.Quota
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return nil, &httpError{http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "invalid quota: " + err.Error()}}
	}
	limits, errs := quotaLimits(q)
	if len(errs) > 0 {
		return nil, specError(errs)
	}
	_, err = s.tc.SignalWithStartWorkflow(r.Context(), workflows.QuotaWorkflowID(ws), workflows.SignalQuotaSet, limits,
		client.StartWorkflowOptions{ID: workflows.QuotaWorkflowID(ws), TaskQueue: s.opts.TaskQueue},
		workflows.QuotaWorkflowName, workflows.QuotaView{Workspace: ws})
	if err != nil {
		return nil, fmt.Errorf("set quota: %w", err)
	}
	return q, nil
}

// getQuota answers a workspace's quota and use; a workspace without a quota has no
// limits and nothing counted.
func (s *Server) getQuota(r *http.Request) (any, error) {
	ws := r.PathValue("ws")
	var view workflows.QuotaView
	v, err := s.tc.QueryWorkflow(r.Context(), workflows.QuotaWorkflowID(ws), "", workflows.QueryQuota)
	switch {
	case isNotFound(err):
		view = workflows.QuotaView{Workspace: ws}
	case err != nil:
		return nil, fmt.Errorf("get quota: %w", err)
	default:
		if err := v.Get(&view); err != nil {
			return nil, fmt.Errorf("get quota: %w", err)
		}
	}
	return quotaStatus(view), nil
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func quotaLimits(q api.Quota) (workflows.QuotaLimits, schemas.ErrorList) {
	var l workflows.QuotaLimits
	var errs schemas.ErrorList
	if q.GPU != nil {
		if *q.GPU < 0 {
			errs = append(errs, schemas.Invalid(schemas.NewPath("gpu"), "must be >= 0"))
		}
		l.GPU = q.GPU
	}
	parse := func(field, s string, milli bool) *int64 {
		if s == "" {
			return nil
		}
		v, err := resource.ParseQuantity(s)
		if err != nil || v.Sign() < 0 {
			errs = append(errs, schemas.Invalid(schemas.NewPath(field), "must be a non-negative quantity such as \"64\", \"500m\" or \"256Gi\""))
			return nil
		}
		n := v.Value()
		if milli {
			n = v.MilliValue()
		}
		return &n
	}
	l.MilliCPU = parse("cpu", q.CPU, true)
	l.MemoryBytes = parse("memory", q.Memory, false)
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
