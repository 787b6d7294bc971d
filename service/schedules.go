package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Schedules is the Schedule service.
type Schedules struct{ *temporalBase }

// Create starts a validated schedule's workflow; it answers the schedule.
func (s *Schedules) Create(ctx context.Context, sched *schemas.Schedule) (api.ScheduleView, error) {
	ws, name := sched.Metadata.Workspace, sched.Metadata.Name
	if err := checkStorage(ctx, s.storage, ws, sched); err != nil {
		return api.ScheduleView{}, err
	}
	now := time.Now().UTC()
	_, err := s.start(ctx, workflows.ScheduleStart(workflows.ScheduleInput{Schedule: *sched}, now), "create schedule",
		fmt.Sprintf("schedule %s already exists in workspace %s; update or delete it", name, ws))
	if err != nil {
		return api.ScheduleView{}, err
	}
	s.log.Info("schedule created", "workspace", ws, "schedule", name)
	return api.ScheduleView{Spec: *sched,
		Status: schemas.ScheduleStatus{Paused: sched.Spec.Paused, PauseNote: sched.Spec.PauseNote, CreateTime: now}}, nil
}

// Get answers a schedule with its next n times.
func (s *Schedules) Get(ctx context.Context, ws, name string, next int) (api.ScheduleView, error) {
	v, err := s.tc.QueryWorkflow(ctx, workflows.ScheduleWorkflowID(ws, name), "", workflows.QueryStatus,
		workflows.ScheduleQuery{Next: next})
	if err != nil {
		return api.ScheduleView{}, scheduleError(ws, name, "get schedule", err)
	}
	var view workflows.ScheduleView
	if err := v.Get(&view); err != nil {
		return api.ScheduleView{}, fmt.Errorf("get schedule: %w", err)
	}
	return api.ScheduleView{Spec: view.Schedule, Status: view.Status}, nil
}

// List answers one page of a workspace's schedules.
func (s *Schedules) List(ctx context.Context, ws string, o ListOptions) (api.ScheduleList, error) {
	// Runs that continued as new are closed; the live run of each schedule is running.
	execs, next, err := s.list(ctx, ws, schemas.KindSchedule, o, false, `ExecutionStatus = "Running"`)
	if err != nil {
		return api.ScheduleList{}, err
	}
	list := api.ScheduleList{Items: []api.ScheduleSummary{}, NextPageToken: next}
	dc := converter.GetDefaultDataConverter()
	for _, e := range execs {
		name, phase := summary(e)
		sum := api.ScheduleSummary{Workspace: ws, Name: name, CreateTime: e.GetStartTime().AsTime(),
			Paused: phase == workflows.SchedulePhasePaused}
		memo := e.GetMemo().GetFields()
		_ = dc.FromPayload(memo[workflows.MemoCron], &sum.Cron)
		_ = dc.FromPayload(memo[workflows.MemoTimeZone], &sum.TimeZone)
		_ = dc.FromPayload(memo[workflows.MemoCreateTime], &sum.CreateTime)
		list.Items = append(list.Items, sum)
	}
	return list, nil
}

// Replace replaces a validated schedule's spec (its name and workspace name the
// schedule) and answers the schedule; the next fire time follows at once.
func (s *Schedules) Replace(ctx context.Context, sched *schemas.Schedule) (api.ScheduleView, error) {
	ws, name := sched.Metadata.Workspace, sched.Metadata.Name
	if err := checkStorage(ctx, s.storage, ws, sched); err != nil {
		return api.ScheduleView{}, err
	}
	return s.viewUpdate(ctx, ws, name, workflows.UpdateScheduleSpec, workflows.UpdateScheduleRequest{Schedule: *sched})
}

// Pause pauses a schedule's scheduled runs and answers the schedule.
func (s *Schedules) Pause(ctx context.Context, ws, name string, req api.PauseScheduleRequest) (api.ScheduleView, error) {
	return s.viewUpdate(ctx, ws, name, workflows.UpdateSchedulePause, workflows.PauseScheduleRequest{Note: req.Note})
}

// Resume resumes a schedule's scheduled runs and answers the schedule.
func (s *Schedules) Resume(ctx context.Context, ws, name string) (api.ScheduleView, error) {
	return s.viewUpdate(ctx, ws, name, workflows.UpdateScheduleResume, workflows.ResumeScheduleRequest{})
}

// Trigger runs a schedule's action now and answers the run.
func (s *Schedules) Trigger(ctx context.Context, ws, name string, req api.TriggerScheduleRequest) (api.TriggerScheduleResult, error) {
	var res workflows.TriggerScheduleResult
	err := s.update(ctx, ws, name, workflows.UpdateScheduleTrigger,
		workflows.TriggerScheduleRequest{OverlapPolicy: req.OverlapPolicy}, &res)
	if err != nil {
		return api.TriggerScheduleResult{}, err
	}
	return api.TriggerScheduleResult{Run: res.Run}, nil
}

// Backfill runs each time of [req.From, req.To) the schedule names, once, and answers
// the runs (an empty list when there are none).
func (s *Schedules) Backfill(ctx context.Context, ws, name string, req api.BackfillScheduleRequest) (api.BackfillScheduleResult, error) {
	var res workflows.BackfillScheduleResult
	err := s.update(ctx, ws, name, workflows.UpdateScheduleBackfill,
		workflows.BackfillScheduleRequest{From: req.From, To: req.To, OverlapPolicy: req.OverlapPolicy}, &res)
	if err != nil {
		return api.BackfillScheduleResult{}, err
	}
	if res.Runs == nil {
		res.Runs = []schemas.ScheduleRun{}
	}
	return api.BackfillScheduleResult{Runs: res.Runs}, nil
}

// viewUpdate sends an update whose result is the schedule and answers the schedule.
func (s *Schedules) viewUpdate(ctx context.Context, ws, name, update string, arg any) (api.ScheduleView, error) {
	var view workflows.ScheduleView
	if err := s.update(ctx, ws, name, update, arg, &view); err != nil {
		return api.ScheduleView{}, err
	}
	return api.ScheduleView{Spec: view.Schedule, Status: view.Status}, nil
}

// update sends an update (workflows.UpdateSchedule*) to a schedule and waits for its
// result into result: ErrNotFound for an unknown schedule, ErrInvalid when the
// workflow's validator refused the request.
func (s *Schedules) update(ctx context.Context, ws, name, update string, arg, result any) error {
	h, err := s.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.ScheduleWorkflowID(ws, name),
		UpdateName:   update,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, result)
	}
	if err != nil {
		return scheduleError(ws, name, update+" schedule", err)
	}
	return nil
}

// scheduleError reads a Temporal error about a schedule.
func scheduleError(ws, name, what string, err error) error {
	var appErr *temporal.ApplicationError
	switch {
	case isNotFound(err):
		return notFound("schedule", ws, name)
	case errors.As(err, &appErr):
		return &Error{Kind: ErrInvalid, Message: appErr.Message()}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Delete terminates a schedule's workflow and deletes every run of it (earlier runs
// continued as new), then returns once they are gone. What the schedule started is
// not touched.
func (s *Schedules) Delete(ctx context.Context, ws, name string) error {
	id := workflows.ScheduleWorkflowID(ws, name)
	desc, err := s.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return scheduleError(ws, name, "describe schedule", err)
	}
	if err := s.tc.TerminateWorkflow(ctx, id, "", "schedule deleted"); err != nil && !isNotFound(err) {
		return fmt.Errorf("terminate schedule: %w", err)
	}
	err = s.deleteExecution(ctx, desc.GetWorkflowExecutionInfo().GetExecution())
	if err == nil {
		err = s.deleteRuns(ctx, id)
	}
	if err == nil {
		err = s.waitDeleted(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	return nil
}
