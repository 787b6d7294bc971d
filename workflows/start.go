package workflows

import (
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/schemas"
)

// StartSpec is how a workflow of one kind is started: its id, its workflow type and
// input, the id reuse policy and the search attributes that list it. It is the one
// definition of these for every starter: the service (api/server's front end), the
// trigger dispatcher, and the workflows that start children (schedules, pipelines,
// experiments). ClientOptions and ChildOptions turn it into Temporal's options.
type StartSpec struct {
	Kind schemas.Kind
	// ID is the workflow id, unique per workspace, kind and name.
	ID string
	// WorkflowType is the registered workflow name; Input its one argument.
	WorkflowType string
	Input        any
	// Reuse is the workflow id reuse policy; unspecified leaves Temporal's default.
	Reuse enumspb.WorkflowIdReusePolicy
	// Attrs are the search attributes set at start (DlcWorkspace, DlcKind, DlcName,
	// DlcPhase, DlcLabels, and DlcFramework for jobs).
	Attrs []temporal.SearchAttributeUpdate
	// Memo is set at start; only schedules have one.
	Memo map[string]any
	// Conflict is what a client start does when a workflow of the same id runs:
	// unspecified is WORKFLOW_ID_CONFLICT_POLICY_FAIL, an error. Children ignore it.
	Conflict enumspb.WorkflowIdConflictPolicy
}

// JobStart starts a TrainingJob: refused when the id was ever used (a deleted job's
// name can be used again because deleting removes the execution).
func JobStart(in TrainingJobInput) StartSpec {
	return jobStart(in, LabelKeywords(in.Job.Metadata.Labels))
}

// JobStartWithLabels is JobStart with the DlcLabels keywords given (a pipeline step's
// job has them computed by the activity that builds it).
func JobStartWithLabels(in TrainingJobInput, labelKeywords []string) StartSpec {
	return jobStart(in, labelKeywords)
}

func jobStart(in TrainingJobInput, labelKeywords []string) StartSpec {
	job := &in.Job
	return kindStart(schemas.KindTrainingJob, &job.Metadata, JobWorkflowID(job.Metadata.Workspace, job.Metadata.Name),
		TrainingJobWorkflowName, in, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, string(schemas.JobPending),
		labelKeywords, FrameworkKey.ValueSet(string(job.Spec.Framework)))
}

// kindStart is the StartSpec of the workflow of an object of kind described by meta:
// its id, workflow type, input and id reuse policy, and the search attributes every
// kind has (DlcWorkspace, DlcKind, DlcName, DlcPhase set to phase, DlcLabels set to
// labelKeywords), then extra ones.
func kindStart(kind schemas.Kind, meta *schemas.ObjectMeta, id, workflowType string, input any,
	reuse enumspb.WorkflowIdReusePolicy, phase string, labelKeywords []string, extra ...temporal.SearchAttributeUpdate,
) StartSpec {
	attrs := []temporal.SearchAttributeUpdate{
		WorkspaceKey.ValueSet(meta.Workspace),
		KindKey.ValueSet(string(kind)),
		NameKey.ValueSet(meta.Name),
		PhaseKey.ValueSet(phase),
		LabelsKey.ValueSet(labelKeywords),
	}
	return StartSpec{Kind: kind, ID: id, WorkflowType: workflowType, Input: input, Reuse: reuse, Attrs: append(attrs, extra...)}
}

// TrialJobStart starts an experiment's trial job. Trials have always been started
// with Temporal's default id reuse policy, which recorded histories keep.
func TrialJobStart(in TrainingJobInput) StartSpec {
	s := JobStart(in)
	s.Reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_UNSPECIFIED
	return s
}

// ExperimentStart starts an Experiment: refused when the id was ever used (deleting an
// experiment removes its execution, so the name can be used again).
func ExperimentStart(in ExperimentInput) StartSpec {
	meta := &in.Experiment.Metadata
	return kindStart(schemas.KindExperiment, meta, ExperimentWorkflowID(meta.Workspace, meta.Name), ExperimentWorkflowName, in,
		enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, string(schemas.ExperimentPending), LabelKeywords(meta.Labels))
}

// PipelineStart starts a pipeline run: refused when the id was ever used.
func PipelineStart(in PipelineInput) StartSpec {
	meta := &in.Pipeline.Metadata
	return kindStart(schemas.KindPipeline, meta, PipelineWorkflowID(meta.Workspace, meta.Name), PipelineWorkflowName, in,
		enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, string(schemas.PipelinePending), LabelKeywords(meta.Labels))
}

// MemoCreateTime is the memo key of a schedule's creation time (the workflow's own
// start time changes when it continues as new).
const MemoCreateTime = "createTime"

// ScheduleStart starts a Schedule created at createTime. A deleted schedule's name may
// be used again; a live one's may not (the conflict policy refuses it).
func ScheduleStart(in ScheduleInput, createTime time.Time) StartSpec {
	sched := &in.Schedule
	meta := &sched.Metadata
	phase := SchedulePhaseActive
	if sched.Spec.Paused {
		phase = SchedulePhasePaused
	}
	s := kindStart(schemas.KindSchedule, meta, ScheduleWorkflowID(meta.Workspace, meta.Name), ScheduleWorkflowName, in,
		enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, phase, LabelKeywords(meta.Labels))
	s.Memo = map[string]any{MemoCron: sched.Spec.Cron, MemoTimeZone: sched.Spec.TimeZone, MemoCreateTime: createTime}
	return s
}

// NodeHealthStart starts the node self-healing workflow (one per cluster) with an
// empty state; when it runs already, the start answers with the running one.
func NodeHealthStart() StartSpec {
	return StartSpec{
		ID:           NodeHealthWorkflowID,
		WorkflowType: NodeHealthWorkflowName,
		Input:        NodeHealthState{},
		Conflict:     enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
}

// QuotaStart starts a workspace's quota workflow with an empty state (no limits,
// nothing counted). Whoever needs it first starts it: the quota service with
// signal-with-start, a job's quota request with update-with-start; both use a running
// one as it is.
func QuotaStart(workspace string) StartSpec {
	return StartSpec{
		ID:           QuotaWorkflowID(workspace),
		WorkflowType: QuotaWorkflowName,
		Input:        QuotaView{Workspace: workspace},
		Conflict:     enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
}

// CohortQuotaStart starts (or finds) a cohort's quota workflow.
func CohortQuotaStart(cohort string) StartSpec {
	return StartSpec{
		ID:           CohortQuotaWorkflowID(cohort),
		WorkflowType: QuotaWorkflowName,
		Input:        QuotaView{Cohort: cohort},
		Conflict:     enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
}

// QuotaStartOptions are the client options for the quota workflow of id (a
// QuotaWorkflowID or a CohortQuotaWorkflowID) on taskQueue: what the quota request
// activity starts it with.
func QuotaStartOptions(id, taskQueue string) client.StartWorkflowOptions {
	if c, ok := cohortOfQuotaID(id); ok {
		return CohortQuotaStart(c).ClientOptions(taskQueue)
	}
	return QuotaStart(workspaceOfQuotaID(id)).ClientOptions(taskQueue)
}

// ClientOptions are the options to start s from a Temporal client on taskQueue. Unless
// s.Conflict says otherwise, a running workflow of the same id is a conflict, reported
// as an error (never answered with the existing run).
func (s StartSpec) ClientOptions(taskQueue string) client.StartWorkflowOptions {
	conflict := s.Conflict
	if conflict == enumspb.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED {
		conflict = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	}
	return client.StartWorkflowOptions{
		ID:                       s.ID,
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    s.Reuse,
		WorkflowIDConflictPolicy: conflict,
		// Without this the SDK answers a duplicate with the existing run instead of an
		// error.
		WorkflowExecutionErrorWhenAlreadyStarted: conflict == enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(s.Attrs...),
		Memo:                                     s.Memo,
	}
}

// ChildOptions are the options to start s as a child workflow. Children are
// abandoned when their parent closes: a parent stops its children itself (through
// their stop update, which cleans up), and a child whose parent was terminated runs
// to its end.
func (s StartSpec) ChildOptions() workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:            s.ID,
		WorkflowIDReusePolicy: s.Reuse,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		TypedSearchAttributes: temporal.NewSearchAttributes(s.Attrs...),
		Memo:                  s.Memo,
	}
}

// ExecuteChild starts s as a child workflow of ctx, listed under the parent's owner
// (DlcOwner) when the parent has one: a trial job, a pipeline step's job and a
// schedule's run belong to who started the experiment, pipeline or schedule.
func (s StartSpec) ExecuteChild(ctx workflow.Context) workflow.ChildWorkflowFuture {
	opts := s.ChildOptions()
	if owner, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(OwnerKey); ok && owner != "" {
		attrs := append(slices.Clone(s.Attrs), OwnerKey.ValueSet(owner))
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(attrs...)
	}
	return workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), s.WorkflowType, s.Input)
}
