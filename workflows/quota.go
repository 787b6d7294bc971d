package workflows

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// A workspace's quota is one long-running WorkspaceQuota workflow (id QuotaWorkflowID).
// It holds the limits, the jobs admitted against them and the queue of jobs waiting,
// so admission survives any worker or server restart and is decided in one place:
//
//   - A job in the quota pool asks to be admitted with the "request" update (started
//     with the workflow if it does not exist yet, through the RequestQuota activity).
//     The answer is Granted, Queued (with the reason) or Rejected (the job alone asks
//     for more than the whole quota).
//   - Queued jobs are admitted in order of priority (higher first), first come first
//     served within a priority. The head of the queue is never overtaken by a smaller
//     job behind it, so a large job cannot starve.
//   - A queued job learns it was admitted from the "quota-decision" signal.
//   - A job gives its share back with the "release" signal when it ends; jobs that end
//     without saying so (terminated) are found by a periodic sweep.
//
// A workspace without limits admits every job at once.
const (
	QuotaWorkflowName = "WorkspaceQuota"

	// UpdateQuotaRequest asks for admission (QuotaRequest → QuotaDecision).
	UpdateQuotaRequest = "request"
	// SignalQuotaRelease gives a job's share back (QuotaRelease).
	SignalQuotaRelease = "release"
	// SignalQuotaSet sets the limits (QuotaLimits).
	SignalQuotaSet = "set"
	// SignalQuotaDecision tells a queued job it was admitted or rejected (QuotaDecision).
	SignalQuotaDecision = "quota-decision"
	// SignalQuotaPreempt tells an admitted job it is preempted (QuotaPreemptNotice).
	SignalQuotaPreempt = "quota-preempt"
	// SignalQuotaMember adds, changes or removes a cohort's member (QuotaMemberSet).
	SignalQuotaMember = "member"
	// SignalQuotaPriority changes a job's priority (QuotaPriority).
	SignalQuotaPriority = "priority"
	// SignalJobPriority tells a job its new priority (int32), which it asks with
	// when it asks for admission again (after a preemption).
	SignalJobPriority = "quota-priority"
	// CohortQuotaKind is the Kind search attribute of a cohort's quota workflow.
	CohortQuotaKind = "CohortQuota"
	// QueryQuota returns a QuotaView.
	QueryQuota = "quota"

	ActivityRequestQuota = "RequestQuota"
	ActivityClosedJobs   = "ClosedJobs"
)

// QuotaWorkflowID is the id of a workspace's quota workflow.
func QuotaWorkflowID(workspace string) string { return "dlc/" + workspace + "/quota" }

// Quota bookkeeping.
const (
	// quotaSweepInterval is how often the quota workflow looks for admitted jobs that
	// ended without releasing their share.
	quotaSweepInterval = time.Minute
	// quotaHistoryLimit bounds the quota workflow's history before it continues as new.
	quotaHistoryLimit = 2000
)

// Amounts are resources in the units the quota counts: whole GPUs, millicores, bytes.
type Amounts = activities.QuotaAmounts

// QuotaLimits are a workspace's limits; a nil field is unlimited. GPU, MilliCPU,
// MemoryBytes and GPUModels are the nominal quota; the rest says how the workspace
// shares it in its cohort (quota_ledger.go, docs/quota.md).
type QuotaLimits struct {
	GPU         *int64 `json:"gpu,omitempty"`
	MilliCPU    *int64 `json:"milliCPU,omitempty"`
	MemoryBytes *int64 `json:"memoryBytes,omitempty"`
	// GPUModels bound the GPUs of each accelerator model (a role's nodeSelector
	// nvidia.com/gpu.product); a model not named is bounded only by GPU.
	GPUModels map[string]int64 `json:"gpuModels,omitempty"`
	// Cohort is the cohort the workspace belongs to, if any: its jobs are admitted by
	// the cohort's quota workflow (CohortQuotaWorkflowID).
	Cohort string `json:"cohort,omitempty"`
	// Borrowing bounds what the workspace uses beyond its nominal quota (default:
	// unbounded); Lending, how much of its nominal quota others may use (default: all).
	Borrowing *QuotaCaps `json:"borrowing,omitempty"`
	Lending   *QuotaCaps `json:"lending,omitempty"`
	// Weight is the workspace's fair-sharing weight in its cohort (default 1).
	Weight     int64           `json:"weight,omitempty"`
	Preemption QuotaPreemption `json:"preemption,omitempty"`
}

// QuotaRequest asks for a job's admission.
type QuotaRequest struct {
	// JobID is the job's workflow id; the decision is signalled there.
	JobID     string  `json:"jobID"`
	Priority  int32   `json:"priority,omitempty"`
	Resources Amounts `json:"resources"`
	// Workspace is the job's workspace: the member a cohort's quota admits it under.
	Workspace string `json:"workspace,omitempty"`
}

// QuotaDecision answers a QuotaRequest.
type QuotaDecision struct {
	Granted  bool   `json:"granted,omitempty"`
	Rejected bool   `json:"rejected,omitempty"`
	Message  string `json:"message,omitempty"`
	// Position is the job's place in the queue (1 = next) when neither granted nor
	// rejected.
	Position int `json:"position,omitempty"`
	// Ledger, when set, is the quota workflow to ask instead: the workspace's cohort's,
	// or back to the workspace's own once it has left the cohort.
	Ledger string `json:"ledger,omitempty"`
}

// QuotaRelease gives a job's share back (or takes it out of the queue).
type QuotaRelease struct {
	JobID string `json:"jobID"`
}

// QuotaPriority changes the priority of a queued or admitted job.
type QuotaPriority struct {
	JobID    string `json:"jobID"`
	Priority int32  `json:"priority"`
}

// QuotaMemberSet adds a workspace to a cohort's quota, sets its limits, or (Remove)
// takes it out: its queued jobs go back to the workspace's own quota, its admitted
// jobs keep their share until they end.
type QuotaMemberSet struct {
	Workspace string      `json:"workspace"`
	Limits    QuotaLimits `json:"limits"`
	Remove    bool        `json:"remove,omitempty"`
}

// QuotaPreemptNotice tells an admitted job it is preempted (SignalQuotaPreempt): it
// stops, releases its share and asks again.
type QuotaPreemptNotice struct {
	// By is the job (workflow id) the capacity goes to, of workspace ByWorkspace.
	By          string `json:"by"`
	ByWorkspace string `json:"byWorkspace,omitempty"`
	// Reason is Reclaimed (the cohort gives a workspace back its nominal quota) or
	// PreemptedByPriority.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// QuotaEviction marks an admitted job being preempted: it keeps its share until it
// releases it.
type QuotaEviction struct {
	By          string    `json:"by"`
	ByWorkspace string    `json:"byWorkspace,omitempty"`
	Reason      string    `json:"reason"`
	Since       time.Time `json:"since"`
}

// QuotaEntry is one admitted or queued job.
type QuotaEntry struct {
	JobID     string    `json:"jobID"`
	Priority  int32     `json:"priority,omitempty"`
	Resources Amounts   `json:"resources"`
	Since     time.Time `json:"since"`
	// Seq orders requests of equal priority.
	Seq int64 `json:"seq"`
	// Borrowing: admitted beyond its workspace's nominal quota.
	Borrowing bool `json:"borrowing,omitempty"`
	// Evicting: admitted, and being preempted.
	Evicting *QuotaEviction `json:"evicting,omitempty"`
	// Reserved: queued, waiting for its Victims to stop; its demand counts as used.
	Reserved bool     `json:"reserved,omitempty"`
	Victims  []string `json:"victims,omitempty"`
}

// QuotaMember is one workspace's part of a quota workflow.
type QuotaMember struct {
	Workspace string       `json:"workspace"`
	Limits    QuotaLimits  `json:"limits"`
	Used      Amounts      `json:"used"`
	Admitted  []QuotaEntry `json:"admitted"`
	Queue     []QuotaEntry `json:"queue"`
	// Removed: the workspace left the cohort; its admitted jobs drain.
	Removed bool `json:"removed,omitempty"`
}

// QuotaView is the quota workflow's state, as the query returns it and as it is carried
// across continue-as-new. A workspace's quota workflow has Workspace set and keeps
// the workspace's own part in Limits, Used, Admitted and Queue; a cohort's has Cohort
// set and one Members entry per workspace.
type QuotaView struct {
	Workspace string       `json:"workspace"`
	Limits    QuotaLimits  `json:"limits"`
	Used      Amounts      `json:"used"`
	Admitted  []QuotaEntry `json:"admitted"`
	Queue     []QuotaEntry `json:"queue"`
	NextSeq   int64        `json:"nextSeq"`
	// Cohort names a cohort's quota workflow; Members are its workspaces.
	Cohort  string        `json:"cohort,omitempty"`
	Members []QuotaMember `json:"members,omitempty"`
	// HistoryBound overrides the bound on a run's history (quotaHistoryLimit); only
	// MaxEvents counts. It is a test knob: the API never sets it.
	HistoryBound *HistoryBound `json:"historyBound,omitempty"`
}

// QuotaWorkflow keeps one workspace's quota, or one cohort's (see the comment on
// QuotaWorkflowName and quota_ledger.go).
func QuotaWorkflow(ctx workflow.Context, state QuotaView) error {
	q := &quotaWorkflow{state: state, logger: workflow.GetLogger(ctx)}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	if q.state.Workspace == "" && q.state.Cohort == "" {
		if c, ok := cohortOfQuotaID(id); ok {
			q.state.Cohort = c
		} else {
			q.state.Workspace = workspaceOfQuotaID(id)
		}
	}
	q.load()
	attrs := []temporal.SearchAttributeUpdate{KindKey.ValueSet(CohortQuotaKind)}
	if q.state.Workspace != "" {
		attrs = []temporal.SearchAttributeUpdate{WorkspaceKey.ValueSet(q.state.Workspace), KindKey.ValueSet(QuotaWorkflowName)}
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		q.logger.Warn("upsert search attributes failed", "error", err)
	}
	if err := workflow.SetQueryHandler(ctx, QueryQuota, func() (QuotaView, error) { return q.view(), nil }); err != nil {
		return err
	}
	// wake lets the main loop see the queue an update changed (to start the sweep).
	wake := workflow.NewBufferedChannel(ctx, 1)
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateQuotaRequest,
		func(ctx workflow.Context, req QuotaRequest) (QuotaDecision, error) {
			d := q.request(ctx, req)
			wake.SendAsync(true)
			return d, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(req QuotaRequest) error {
			if req.JobID == "" {
				return errors.New("jobID: required")
			}
			return nil
		}},
	); err != nil {
		return err
	}
	release := workflow.GetSignalChannel(ctx, SignalQuotaRelease)
	set := workflow.GetSignalChannel(ctx, SignalQuotaSet)
	member := workflow.GetSignalChannel(ctx, SignalQuotaMember)
	priority := workflow.GetSignalChannel(ctx, SignalQuotaPriority)
	onRelease := func(c workflow.ReceiveChannel, _ bool) {
		var r QuotaRelease
		c.Receive(ctx, &r)
		q.release(r.JobID)
	}
	onSet := func(c workflow.ReceiveChannel, _ bool) {
		var l QuotaLimits
		c.Receive(ctx, &l)
		if q.state.Workspace != "" {
			q.members[0].Limits = l
		}
	}
	onMember := func(c workflow.ReceiveChannel, _ bool) {
		var m QuotaMemberSet
		c.Receive(ctx, &m)
		q.setMember(ctx, m)
	}
	onPriority := func(c workflow.ReceiveChannel, _ bool) {
		var p QuotaPriority
		c.Receive(ctx, &p)
		q.setPriority(p)
	}
	receive := func(sel workflow.Selector) {
		sel.AddReceive(release, onRelease)
		sel.AddReceive(set, onSet)
		sel.AddReceive(member, onMember)
		sel.AddReceive(priority, onPriority)
	}
	pending := func() bool { return release.Len()+set.Len()+member.Len()+priority.Len() > 0 }
	var sweep workflow.Future
	for {
		if err := ctx.Err(); err != nil {
			return err // cancelled: the quota goes with it
		}
		if sweep == nil && q.holdsJobs() {
			sweep = workflow.NewTimer(ctx, quotaSweepInterval)
		}
		sel := workflow.NewSelector(ctx)
		receive(sel)
		sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		if sweep != nil {
			sel.AddFuture(sweep, func(workflow.Future) {
				sweep = nil
				q.sweep(ctx)
			})
		}
		sel.Select(ctx)
		q.admit(ctx)
		q.settle(ctx)
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > q.historyLimit() {
			// Take in what already arrived, then carry the state over.
			takeIn := func() {
				for pending() {
					sel := workflow.NewSelector(ctx)
					receive(sel)
					sel.Select(ctx)
				}
				q.admit(ctx)
			}
			takeIn()
			// The server delivers a signal only while the run that sent it is open
			// (it drops the signals of a run that has closed): wait until every
			// decision sent has been delivered (or has failed), and take in what
			// arrives meanwhile, which may admit and tell more jobs.
			for {
				if err := workflow.Await(ctx, func() bool { return q.allTold() && workflow.AllHandlersFinished(ctx) }); err != nil {
					return err // cancelled
				}
				q.settle(ctx)
				if !pending() {
					break
				}
				takeIn()
			}
			return workflow.NewContinueAsNewError(ctx, QuotaWorkflowName, q.view())
		}
	}
}

// historyLimit is the run's bound on its history: quotaHistoryLimit, or the test
// knob's.
func (q *quotaWorkflow) historyLimit() int {
	if b := q.state.HistoryBound; b != nil && b.MaxEvents > 0 {
		return b.MaxEvents
	}
	return quotaHistoryLimit
}

const (
	quotaPrefix       = "dlc/"
	cohortQuotaPrefix = "dlc-cohort/"
	quotaSuffix       = "/quota"
)

// workspaceOfQuotaID is QuotaWorkflowID's inverse.
func workspaceOfQuotaID(id string) string {
	ws := strings.TrimPrefix(id, quotaPrefix)
	return strings.TrimSuffix(ws, quotaSuffix)
}

// CohortQuotaWorkflowID is the id of a cohort's quota workflow. Its prefix is not
// "dlc/", so it cannot be any workspace's workflow id.
func CohortQuotaWorkflowID(cohort string) string { return cohortQuotaPrefix + cohort + quotaSuffix }

// cohortOfQuotaID is CohortQuotaWorkflowID's inverse.
func cohortOfQuotaID(id string) (string, bool) {
	c, ok := strings.CutPrefix(id, cohortQuotaPrefix)
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(c, quotaSuffix), true
}

type quotaWorkflow struct {
	state QuotaView
	// members are the ledger's members: the workspace's own part (one), or the
	// cohort's workspaces. view() writes them back into the state.
	members []*QuotaMember
	logger  log.Logger
	// telling are the quota-decision and preempt signals sent whose delivery the
	// server has not confirmed yet.
	telling []decisionSent
}

// load takes the members out of the state.
func (q *quotaWorkflow) load() {
	if q.state.Workspace != "" {
		q.members = []*QuotaMember{{Workspace: q.state.Workspace, Limits: q.state.Limits, Used: q.state.Used,
			Admitted: q.state.Admitted, Queue: q.state.Queue}}
		return
	}
	for i := range q.state.Members {
		m := q.state.Members[i]
		q.members = append(q.members, &m)
	}
}

func (q *quotaWorkflow) ledger() *ledger {
	return &ledger{members: q.members, cohort: q.state.Workspace == ""}
}

func (q *quotaWorkflow) holdsJobs() bool {
	for _, m := range q.members {
		if len(m.Admitted)+len(m.Queue) > 0 {
			return true
		}
	}
	return false
}

// member is the workspace's member, or nil.
func (q *quotaWorkflow) member(ws string) *QuotaMember {
	if q.state.Workspace != "" {
		return q.members[0]
	}
	for _, m := range q.members {
		if m.Workspace == ws {
			return m
		}
	}
	return nil
}

// decisionSent is a quota-decision or preempt signal on its way to a job.
type decisionSent struct {
	jobID string
	sent  workflow.Future
}

// allTold reports whether the server has answered every decision signal sent.
func (q *quotaWorkflow) allTold() bool {
	for _, d := range q.telling {
		if !d.sent.IsReady() {
			return false
		}
	}
	return true
}

// settle forgets the decision signals the server has answered, logging those it
// could not deliver: the job has ended (the sweep then returns its share), or it is
// gone.
func (q *quotaWorkflow) settle(ctx workflow.Context) {
	pending := q.telling[:0]
	for _, d := range q.telling {
		if !d.sent.IsReady() {
			pending = append(pending, d)
			continue
		}
		if err := d.sent.Get(ctx, nil); err != nil {
			q.logger.Warn("could not tell a job its quota decision", "job", d.jobID, "error", err)
		}
	}
	q.telling = pending
}

func (q *quotaWorkflow) view() QuotaView {
	v := q.state
	copyMember := func(m *QuotaMember) QuotaMember {
		c := *m
		c.Admitted = append([]QuotaEntry{}, m.Admitted...)
		c.Queue = append([]QuotaEntry{}, m.Queue...)
		return c
	}
	if v.Workspace != "" {
		m := copyMember(q.members[0])
		v.Limits, v.Used, v.Admitted, v.Queue = m.Limits, m.Used, m.Admitted, m.Queue
		v.Members = nil
		return v
	}
	v.Members = nil
	for _, m := range q.members {
		v.Members = append(v.Members, copyMember(m))
	}
	return v
}

// request answers a job's admission request. It is idempotent: a job already admitted
// is granted again, a job already queued keeps its place. A workspace's quota whose
// workspace is in a cohort sends the job to the cohort's; a cohort's quota sends a job
// of a workspace that is not (or no longer) its member back to the workspace's own.
func (q *quotaWorkflow) request(ctx workflow.Context, req QuotaRequest) QuotaDecision {
	for _, m := range q.members {
		for _, e := range m.Admitted {
			if e.JobID == req.JobID {
				return QuotaDecision{Granted: true}
			}
		}
	}
	ws := req.Workspace
	if q.state.Workspace != "" {
		ws = q.state.Workspace
	}
	m := q.member(ws)
	queued := false
	if m != nil {
		for _, e := range m.Queue {
			queued = queued || e.JobID == req.JobID
		}
	}
	if !queued {
		switch {
		case q.state.Workspace != "" && m.Limits.Cohort != "":
			return QuotaDecision{Ledger: CohortQuotaWorkflowID(m.Limits.Cohort),
				Message: "the workspace is in cohort " + m.Limits.Cohort}
		case m == nil || m.Removed:
			return QuotaDecision{Ledger: QuotaWorkflowID(ws),
				Message: fmt.Sprintf("workspace %s is not in cohort %s", ws, q.state.Cohort)}
		}
		if why := q.ledger().tooBig(m, vecOf(req.Resources)); why != "" {
			return QuotaDecision{Rejected: true, Message: why}
		}
		q.state.NextSeq++
		m.Queue = append(m.Queue, QuotaEntry{
			JobID: req.JobID, Priority: req.Priority, Resources: req.Resources,
			Since: workflow.Now(ctx), Seq: q.state.NextSeq,
		})
	}
	decisions := q.admit(ctx, req.JobID)
	if d, ok := decisions[req.JobID]; ok {
		return d
	}
	if d, ok := q.ledger().waitReason(m, req.JobID); ok {
		return d
	}
	return QuotaDecision{Granted: true}
}

// admit runs the ledger's admission pass, tells each granted or rejected job by signal
// (except skip, which gets its answer as the update's result) and each victim it is
// preempted, and returns the decisions made.
func (q *quotaWorkflow) admit(ctx workflow.Context, skip ...string) map[string]QuotaDecision {
	out := q.ledger().admit(workflow.Now(ctx))
	for _, id := range out.order {
		if len(skip) > 0 && skip[0] == id {
			continue
		}
		// A job that has ended meanwhile cannot be signalled; the sweep then
		// returns its share. settle looks at the outcome.
		q.telling = append(q.telling, decisionSent{jobID: id,
			sent: workflow.SignalExternalWorkflow(ctx, id, "", SignalQuotaDecision, out.decisions[id])})
	}
	for _, p := range out.preempt {
		q.logger.Info("preempting a job", "job", p.victim, "for", p.notice.By, "reason", p.notice.Reason)
		q.telling = append(q.telling, decisionSent{jobID: p.victim,
			sent: workflow.SignalExternalWorkflow(ctx, p.victim, "", SignalQuotaPreempt, p.notice)})
	}
	return out.decisions
}

// release returns a job's share, or takes it out of the queue.
func (q *quotaWorkflow) release(jobID string) {
	for _, m := range q.members {
		for i, e := range m.Admitted {
			if e.JobID == jobID {
				m.Admitted = append(m.Admitted[:i:i], m.Admitted[i+1:]...)
				m.recount()
				q.dropRemoved()
				return
			}
		}
		for i, e := range m.Queue {
			if e.JobID == jobID {
				m.Queue = append(m.Queue[:i:i], m.Queue[i+1:]...)
				return
			}
		}
	}
}

// setMember adds, changes or removes a cohort member. A removed member's queued jobs
// are sent back to the workspace's own quota; its admitted jobs drain.
func (q *quotaWorkflow) setMember(ctx workflow.Context, set QuotaMemberSet) {
	if q.state.Workspace != "" || set.Workspace == "" {
		return // only a cohort's quota has members
	}
	m := q.member(set.Workspace)
	if m == nil {
		if set.Remove {
			return
		}
		m = &QuotaMember{Workspace: set.Workspace}
		q.members = append(q.members, m)
		sort.SliceStable(q.members, func(i, j int) bool { return q.members[i].Workspace < q.members[j].Workspace })
	}
	m.Limits, m.Removed = set.Limits, set.Remove
	if !set.Remove {
		return
	}
	back := QuotaDecision{Ledger: QuotaWorkflowID(m.Workspace), Message: fmt.Sprintf("workspace %s left cohort %s", m.Workspace, q.state.Cohort)}
	for _, e := range m.Queue {
		q.telling = append(q.telling, decisionSent{jobID: e.JobID,
			sent: workflow.SignalExternalWorkflow(ctx, e.JobID, "", SignalQuotaDecision, back)})
	}
	m.Queue = nil
	q.dropRemoved()
}

// dropRemoved forgets removed members whose jobs have all ended.
func (q *quotaWorkflow) dropRemoved() {
	if q.state.Workspace != "" {
		return
	}
	kept := q.members[:0]
	for _, m := range q.members {
		if !m.Removed || len(m.Admitted)+len(m.Queue) > 0 {
			kept = append(kept, m)
		}
	}
	q.members = kept
}

// setPriority changes a job's priority, queued or admitted; the queue is reordered at
// the next admission pass.
func (q *quotaWorkflow) setPriority(p QuotaPriority) {
	for _, m := range q.members {
		for _, list := range [][]QuotaEntry{m.Admitted, m.Queue} {
			for i := range list {
				if list[i].JobID == p.JobID {
					list[i].Priority = p.Priority
					return
				}
			}
		}
	}
}

// sweep releases the jobs that ended without releasing (terminated, or deleted).
func (q *quotaWorkflow) sweep(ctx workflow.Context) {
	var ids []string
	for _, m := range q.members {
		for _, e := range m.Admitted {
			ids = append(ids, e.JobID)
		}
		for _, e := range m.Queue {
			ids = append(ids, e.JobID)
		}
	}
	if len(ids) == 0 {
		return
	}
	closed, err := closedJobs(ctx, ids)
	if err != nil {
		q.logger.Warn("quota sweep failed", "error", err)
		return
	}
	for _, id := range closed {
		q.release(id)
	}
}

// GPUModelLabel is the node label naming a node's GPU model (NVIDIA's GPU feature
// discovery sets it): a role that selects it counts its GPUs against the quota of
// that model (QuotaLimits.GPUModels) as well as against GPU.
const GPUModelLabel = "nvidia.com/gpu.product"

// jobDemand is what a job counts against its workspace's quota: the sum over its
// replicas. Validation bounds each replica's request (schemas.MaxReplicaCPU and
// MaxReplicaMemory), so a valid job's sum fits; the arithmetic saturates anyway, so
// that no quantity, however large, counts as less than it is.
func jobDemand(job *schemas.TrainingJob) Amounts {
	var a Amounts
	names := make([]string, 0, len(job.Spec.Roles))
	for name := range job.Spec.Roles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := job.Spec.Roles[name]
		n := int64(r.Replicas)
		add := Amounts{
			GPU:         activities.SaturatingMul(n, int64(r.Resources.GPU)),
			MilliCPU:    activities.SaturatingMul(n, quantityCount(r.Resources.CPU, true)),
			MemoryBytes: activities.SaturatingMul(n, quantityCount(r.Resources.Memory, false)),
		}
		if model := r.NodeSelector[GPUModelLabel]; model != "" && add.GPU > 0 {
			add.GPUModels = map[string]int64{model: add.GPU}
		}
		a = a.Add(add)
	}
	return a
}

// quantityCount is q as a count of units (of thousandths when milli), rounded up; 0
// when q is nil or not positive, and math.MaxInt64 when q is past it (where
// Quantity.Value and MilliValue give 0 or wrap around: "1e400" is 0 to them,
// "9223372036854775807" cores -1000 millicores).
func quantityCount(q *resource.Quantity, milli bool) int64 {
	if q == nil || q.Sign() <= 0 {
		return 0
	}
	limit := resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	if milli {
		limit = resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	}
	if q.Cmp(*limit) >= 0 {
		return math.MaxInt64
	}
	if milli {
		return q.MilliValue()
	}
	return q.Value()
}
