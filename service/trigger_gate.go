package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/workflows"
)

// TriggerStatus asks a trigger's gate for its state (workflows.QueryTriggerGate). A
// trigger without a gate answers Gate false. The caller checks that the trigger exists.
func (s *Service) TriggerStatus(ctx context.Context, ws, name string) (api.TriggerStatus, error) {
	if s.Jobs.tc == nil {
		return api.TriggerStatus{}, errors.New("service: no Temporal client to query the trigger's gate with")
	}
	v, err := s.Jobs.tc.QueryWorkflow(ctx, workflows.TriggerGateWorkflowID(ws, name), "", workflows.QueryTriggerGate)
	if isNotFound(err) {
		return api.TriggerStatus{}, nil
	}
	var st workflows.TriggerGateState
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		return api.TriggerStatus{}, fmt.Errorf("query the gate of trigger %s/%s: %w", ws, name, err)
	}
	out := api.TriggerStatus{Gate: true, Events: st.Events, Started: st.Started, Refused: st.Refused,
		Dropped: st.DroppedCount, Queued: len(st.Queue)}
	if st.Window != nil {
		end := st.WindowEnd
		out.Window, out.WindowEnd = len(st.Window.Events), &end
	}
	for _, r := range st.Running {
		out.Running = append(out.Running, r.Name)
	}
	for _, d := range st.Dropped {
		out.RecentDrops = append(out.RecentDrops, api.TriggerDrop{FirstEvent: d.FirstEvent, Events: d.Events, Time: d.Time, Reason: d.Reason})
	}
	return out, nil
}
