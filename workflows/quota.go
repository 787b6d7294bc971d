package workflows

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"go.temporal.io/sdk/log"
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

// QuotaLimits are a workspace's limits; a nil field is unlimited.
type QuotaLimits struct {
	GPU         *int64 `json:"gpu,omitempty"`
	MilliCPU    *int64 `json:"milliCPU,omitempty"`
	MemoryBytes *int64 `json:"memoryBytes,omitempty"`
}

// exceeded names the first resource for which used+add passes the limits, or "". The
// sums saturate (activities.SaturatingAdd), so a huge request cannot wrap around to fit.
func (l QuotaLimits) exceeded(used, add Amounts) string {
	switch {
	case l.GPU != nil && activities.SaturatingAdd(used.GPU, add.GPU) > *l.GPU:
		return fmt.Sprintf("gpu: %d requested, %d of %d in use", add.GPU, used.GPU, *l.GPU)
	case l.MilliCPU != nil && activities.SaturatingAdd(used.MilliCPU, add.MilliCPU) > *l.MilliCPU:
		return fmt.Sprintf("cpu: %dm requested, %dm of %dm in use", add.MilliCPU, used.MilliCPU, *l.MilliCPU)
	case l.MemoryBytes != nil && activities.SaturatingAdd(used.MemoryBytes, add.MemoryBytes) > *l.MemoryBytes:
		return fmt.Sprintf("memory: %d bytes requested, %d of %d in use", add.MemoryBytes, used.MemoryBytes, *l.MemoryBytes)
	}
	return ""
}

// QuotaRequest asks for a job's admission.
type QuotaRequest struct {
	// JobID is the job's workflow id; the decision is signalled there.
	JobID     string  `json:"jobID"`
	Priority  int32   `json:"priority,omitempty"`
	Resources Amounts `json:"resources"`
}

// QuotaDecision answers a QuotaRequest.
type QuotaDecision struct {
	Granted  bool   `json:"granted,omitempty"`
	Rejected bool   `json:"rejected,omitempty"`
	Message  string `json:"message,omitempty"`
	// Position is the job's place in the queue (1 = next) when neither granted nor
	// rejected.
	Position int `json:"position,omitempty"`
}

// QuotaRelease gives a job's share back (or takes it out of the queue).
type QuotaRelease struct {
	JobID string `json:"jobID"`
}

// QuotaEntry is one admitted or queued job.
type QuotaEntry struct {
	JobID     string    `json:"jobID"`
	Priority  int32     `json:"priority,omitempty"`
	Resources Amounts   `json:"resources"`
	Since     time.Time `json:"since"`
	// Seq orders requests of equal priority.
	Seq int64 `json:"seq"`
}

// QuotaView is the quota workflow's state, as the query returns it and as it is carried
// across continue-as-new.
type QuotaView struct {
	Workspace string       `json:"workspace"`
	Limits    QuotaLimits  `json:"limits"`
	Used      Amounts      `json:"used"`
	Admitted  []QuotaEntry `json:"admitted"`
	Queue     []QuotaEntry `json:"queue"`
	NextSeq   int64        `json:"nextSeq"`
	// HistoryBound overrides the bound on a run's history (quotaHistoryLimit); only
	// MaxEvents counts. It is a test knob: the API never sets it.
	HistoryBound *HistoryBound `json:"historyBound,omitempty"`
}

// QuotaWorkflow keeps one workspace's quota (see the comment on QuotaWorkflowName).
func QuotaWorkflow(ctx workflow.Context, state QuotaView) error {
	q := &quotaWorkflow{state: state, logger: workflow.GetLogger(ctx)}
	if q.state.Workspace == "" {
		q.state.Workspace = workspaceOfQuotaID(workflow.GetInfo(ctx).WorkflowExecution.ID)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		WorkspaceKey.ValueSet(q.state.Workspace), KindKey.ValueSet(QuotaWorkflowName)); err != nil {
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
	onRelease := func(c workflow.ReceiveChannel, _ bool) {
		var r QuotaRelease
		c.Receive(ctx, &r)
		q.release(r.JobID)
	}
	onSet := func(c workflow.ReceiveChannel, _ bool) {
		var l QuotaLimits
		c.Receive(ctx, &l)
		q.state.Limits = l
	}
	var sweep workflow.Future
	for {
		if err := ctx.Err(); err != nil {
			return err // cancelled: the quota goes with it
		}
		if sweep == nil && len(q.state.Admitted)+len(q.state.Queue) > 0 {
			sweep = workflow.NewTimer(ctx, quotaSweepInterval)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(release, onRelease)
		sel.AddReceive(set, onSet)
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
				for release.Len() > 0 || set.Len() > 0 {
					sel := workflow.NewSelector(ctx)
					sel.AddReceive(release, onRelease)
					sel.AddReceive(set, onSet)
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
				if release.Len() == 0 && set.Len() == 0 {
					break
				}
				takeIn()
			}
			return workflow.NewContinueAsNewError(ctx, QuotaWorkflowName, q.state)
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

const quotaPrefix = "dlc/"

// workspaceOfQuotaID is QuotaWorkflowID's inverse.
func workspaceOfQuotaID(id string) string {
	ws := id[len(quotaPrefix):]
	return ws[:len(ws)-len("/quota")]
}

type quotaWorkflow struct {
	state  QuotaView
	logger log.Logger
	// telling are the quota-decision signals sent whose delivery the server has not
	// confirmed yet.
	telling []decisionSent
}

// decisionSent is a quota-decision signal on its way to a job.
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
	v.Admitted = append([]QuotaEntry{}, q.state.Admitted...)
	v.Queue = append([]QuotaEntry{}, q.state.Queue...)
	return v
}

// request answers a job's admission request. It is idempotent: a job already admitted
// is granted again, a job already queued keeps its place.
func (q *quotaWorkflow) request(ctx workflow.Context, req QuotaRequest) QuotaDecision {
	for _, e := range q.state.Admitted {
		if e.JobID == req.JobID {
			return QuotaDecision{Granted: true}
		}
	}
	queued := false
	for _, e := range q.state.Queue {
		queued = queued || e.JobID == req.JobID
	}
	if !queued {
		if why := q.state.Limits.exceeded(Amounts{}, req.Resources); why != "" {
			return QuotaDecision{Rejected: true, Message: "the job alone exceeds the workspace quota: " + why}
		}
		q.state.NextSeq++
		q.state.Queue = append(q.state.Queue, QuotaEntry{
			JobID: req.JobID, Priority: req.Priority, Resources: req.Resources,
			Since: workflow.Now(ctx), Seq: q.state.NextSeq,
		})
	}
	decisions := q.admit(ctx, req.JobID)
	if d, ok := decisions[req.JobID]; ok {
		return d
	}
	return q.queuedDecision(req.JobID)
}

// queuedDecision says why a queued job waits and where it stands.
func (q *quotaWorkflow) queuedDecision(jobID string) QuotaDecision {
	for i, e := range q.state.Queue {
		if e.JobID != jobID {
			continue
		}
		why := q.state.Limits.exceeded(q.state.Used, e.Resources)
		if i > 0 {
			why = fmt.Sprintf("%d job(s) ahead in the workspace queue", i)
		}
		return QuotaDecision{Position: i + 1, Message: "waiting for workspace quota: " + why}
	}
	return QuotaDecision{Granted: true}
}

// admit grants queued jobs in order while they fit, tells each granted or rejected job
// by signal (except skip, which gets its answer as the update's result), and returns
// the decisions made.
func (q *quotaWorkflow) admit(ctx workflow.Context, skip ...string) map[string]QuotaDecision {
	sort.SliceStable(q.state.Queue, func(i, j int) bool {
		a, b := q.state.Queue[i], q.state.Queue[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.Seq < b.Seq
	})
	decisions := map[string]QuotaDecision{}
	var order []string
	for len(q.state.Queue) > 0 {
		head := q.state.Queue[0]
		if why := q.state.Limits.exceeded(Amounts{}, head.Resources); why != "" {
			decisions[head.JobID] = QuotaDecision{Rejected: true, Message: "the job alone exceeds the workspace quota: " + why}
		} else if q.state.Limits.exceeded(q.state.Used, head.Resources) != "" {
			break // the head waits, and nobody overtakes it
		} else {
			q.state.Used = q.state.Used.Add(head.Resources)
			head.Since = workflow.Now(ctx)
			q.state.Admitted = append(q.state.Admitted, head)
			decisions[head.JobID] = QuotaDecision{Granted: true}
		}
		order = append(order, head.JobID)
		q.state.Queue = q.state.Queue[1:]
	}
	for _, id := range order {
		if len(skip) > 0 && skip[0] == id {
			continue
		}
		// A job that has ended meanwhile cannot be signalled; the sweep then
		// returns its share. settle looks at the outcome.
		q.telling = append(q.telling, decisionSent{jobID: id,
			sent: workflow.SignalExternalWorkflow(ctx, id, "", SignalQuotaDecision, decisions[id])})
	}
	return decisions
}

// release returns a job's share, or takes it out of the queue.
func (q *quotaWorkflow) release(jobID string) {
	for i, e := range q.state.Admitted {
		if e.JobID == jobID {
			q.state.Admitted = append(q.state.Admitted[:i:i], q.state.Admitted[i+1:]...)
			q.recount()
			return
		}
	}
	for i, e := range q.state.Queue {
		if e.JobID == jobID {
			q.state.Queue = append(q.state.Queue[:i:i], q.state.Queue[i+1:]...)
			return
		}
	}
}

// recount sets the use to the sum of the admitted jobs' shares. A saturated sum
// (activities.SaturatingAdd) less a share is not the use of the others, so the use is
// added up again rather than subtracted from.
func (q *quotaWorkflow) recount() {
	var used Amounts
	for _, e := range q.state.Admitted {
		used = used.Add(e.Resources)
	}
	q.state.Used = used
}

// sweep releases the jobs that ended without releasing (terminated, or deleted).
func (q *quotaWorkflow) sweep(ctx workflow.Context) {
	var ids []string
	for _, e := range q.state.Admitted {
		ids = append(ids, e.JobID)
	}
	for _, e := range q.state.Queue {
		ids = append(ids, e.JobID)
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
		a = a.Add(Amounts{
			GPU:         activities.SaturatingMul(n, int64(r.Resources.GPU)),
			MilliCPU:    activities.SaturatingMul(n, quantityCount(r.Resources.CPU, true)),
			MemoryBytes: activities.SaturatingMul(n, quantityCount(r.Resources.Memory, false)),
		})
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
