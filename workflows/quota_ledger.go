package workflows

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/activities"
)

// The ledger is the admission logic of a quota workflow, free of Temporal so that it
// can be read and tested on its own. A workspace quota is a ledger of one member; a
// cohort's quota is a ledger of its member workspaces. See docs/quota.md.
//
// For each resource a member limits (GPUs, GPUs of one accelerator model, CPU,
// memory), it has a nominal quota N, a lending limit L (at most N; default N) and a
// borrowing limit B (default unlimited). N-L is guaranteed: only the member uses it.
// The rest of every member's nominal quota forms the cohort's pool P = ΣL; a member's
// use beyond its guaranteed part draws on the pool. A job of member m that asks for d
// is admitted when, for every resource m limits,
//
//	used(m) + d ≤ N(m) + B(m)                  (its borrowing limit)
//	Σ_k max(0, used(k) − (N(k)−L(k))) ≤ P      (the pool, with d added to m)
//
// A workspace outside any cohort cannot borrow: used + d ≤ N.
//
// Admission order: one queue per member, by priority then arrival; a member's head is
// never overtaken by a job behind it. Among the members' heads, the one whose
// admission leaves its member with the lowest weighted dominant share of borrowed
// capacity (max over resources of borrowed/P, divided by its weight) goes first; ties
// by priority, then arrival. A head within its member's nominal quota borrows nothing:
// its share is 0.
//
// Preemption, when no head fits: a head within its member's nominal quota reclaims
// capacity other members borrow (reclaimWithinCohort: Any, the default, or
// LowerPriority); a member with withinWorkspace LowerPriority lets a head preempt the
// member's own jobs of lower priority. Victims: reclaim before priority preemption,
// then lowest priority first, then most recently admitted first, only as many as
// needed. A victim keeps its share (it is Evicting) until its job has stopped and
// released it; the preemptor is Reserved meanwhile: its demand counts against the
// others, so nobody else takes what the victims give back.

// Resource names in a ledger's vectors.
const (
	resGPU      = "gpu"
	resCPU      = "cpu"
	resMemory   = "memory"
	resGPUModel = "gpu/" // + the model
)

// Preemption policies (QuotaPreemption).
const (
	PreemptNever         = "Never"
	PreemptLowerPriority = "LowerPriority"
	PreemptAny           = "Any"
)

// QuotaCaps bound amounts per resource; a nil field (or a model not in GPUModels) is
// not bounded.
type QuotaCaps struct {
	GPU         *int64           `json:"gpu,omitempty"`
	MilliCPU    *int64           `json:"milliCPU,omitempty"`
	MemoryBytes *int64           `json:"memoryBytes,omitempty"`
	GPUModels   map[string]int64 `json:"gpuModels,omitempty"`
}

// QuotaPreemption says what a member's queued jobs may preempt.
type QuotaPreemption struct {
	// ReclaimWithinCohort: whether a job within its workspace's nominal quota preempts
	// jobs of other members that borrow: Any (default), LowerPriority or Never.
	ReclaimWithinCohort string `json:"reclaimWithinCohort,omitempty"`
	// WithinWorkspace: whether a job preempts the workspace's own jobs of lower
	// priority: Never (default) or LowerPriority.
	WithinWorkspace string `json:"withinWorkspace,omitempty"`
}

func (p QuotaPreemption) reclaim() string {
	if p.ReclaimWithinCohort == "" {
		return PreemptAny
	}
	return p.ReclaimWithinCohort
}

// resVec is an amount per resource name.
type resVec map[string]int64

func vecOf(a Amounts) resVec {
	v := resVec{resGPU: a.GPU, resCPU: a.MilliCPU, resMemory: a.MemoryBytes}
	for model, n := range a.GPUModels {
		v[resGPUModel+model] = n
	}
	return v
}

// capsVec is the bounded resources of c.
func capsVec(c *QuotaCaps) resVec {
	v := resVec{}
	if c == nil {
		return v
	}
	if c.GPU != nil {
		v[resGPU] = *c.GPU
	}
	if c.MilliCPU != nil {
		v[resCPU] = *c.MilliCPU
	}
	if c.MemoryBytes != nil {
		v[resMemory] = *c.MemoryBytes
	}
	for model, n := range c.GPUModels {
		v[resGPUModel+model] = n
	}
	return v
}

// nominalVec is the resources the limits bound, with their nominal quota.
func (l QuotaLimits) nominalVec() resVec {
	return capsVec(&QuotaCaps{GPU: l.GPU, MilliCPU: l.MilliCPU, MemoryBytes: l.MemoryBytes, GPUModels: l.GPUModels})
}

// weight is the member's fair-sharing weight (default 1).
func (l QuotaLimits) weight() float64 {
	if l.Weight <= 0 {
		return 1
	}
	return float64(l.Weight)
}

// sortedKeys are v's resources in the order messages name them: GPUs, GPUs by model,
// CPU, memory.
func sortedKeys(v resVec) []string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	rank := func(r string) int {
		switch {
		case r == resGPU:
			return 0
		case strings.HasPrefix(r, resGPUModel):
			return 1
		case r == resCPU:
			return 2
		}
		return 3
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := rank(keys[i]), rank(keys[j]); a != b {
			return a < b
		}
		return keys[i] < keys[j]
	})
	return keys
}

// describe names a resource amount as users write it.
func describe(r string, n int64) string {
	switch {
	case r == resCPU:
		return fmt.Sprintf("%dm", n)
	case r == resMemory:
		return fmt.Sprintf("%d bytes", n)
	}
	return strconv.FormatInt(n, 10)
}

// aloneMessage says that d of r does not fit a workspace quota outside any cohort.
func aloneMessage(r string, d, used, nominal int64) string {
	switch r {
	case resCPU:
		return fmt.Sprintf("cpu: %dm requested, %dm of %dm in use", d, used, nominal)
	case resMemory:
		return fmt.Sprintf("memory: %d bytes requested, %d of %d in use", d, used, nominal)
	}
	return fmt.Sprintf("%s: %d requested, %d of %d in use", r, d, used, nominal)
}

// ledger decides admission over the members of one quota workflow.
type ledger struct {
	members []*QuotaMember
	// cohort: the members share a pool (a cohort ledger); else one member, no
	// borrowing.
	cohort bool
}

// memberCaps are one member's vectors.
type memberCaps struct {
	nominal, borrow, lend resVec
}

func (l *ledger) caps(m *QuotaMember) memberCaps {
	c := memberCaps{nominal: m.Limits.nominalVec(), borrow: capsVec(m.Limits.Borrowing), lend: capsVec(m.Limits.Lending)}
	return c
}

// guaranteed is N-L of resource r: the part only m uses.
func (c memberCaps) guaranteed(r string) int64 {
	n := c.nominal[r]
	l, ok := c.lend[r]
	if !ok || l > n {
		return 0
	}
	return n - max(l, 0)
}

// lendable is L of resource r.
func (c memberCaps) lendable(r string) int64 { return c.nominal[r] - c.guaranteed(r) }

// ceiling is the most of r the member may use: N+B in a cohort (unbounded without
// B), N alone.
func (l *ledger) ceiling(c memberCaps, r string) int64 {
	if !l.cohort {
		return c.nominal[r]
	}
	b, ok := c.borrow[r]
	if !ok {
		return math.MaxInt64
	}
	return activities.SaturatingAdd(c.nominal[r], b)
}

// excluded names entries (by job id) a computation leaves out: victims being chosen.
type excluded map[string]bool

// usage is what member m holds: its admitted jobs (evicting ones too) except those
// excluded, and the demand of its reserved queued jobs except self's.
func (l *ledger) usage(m *QuotaMember, excl excluded, self string) resVec {
	u := resVec{}
	add := func(e QuotaEntry) {
		for r, n := range vecOf(e.Resources) {
			u[r] = activities.SaturatingAdd(u[r], n)
		}
	}
	for _, e := range m.Admitted {
		if !excl[e.JobID] {
			add(e)
		}
	}
	for _, e := range m.Queue {
		if e.Reserved && e.JobID != self {
			add(e)
		}
	}
	return u
}

// pool is the cohort's pool of r: the sum of the members' lendable amounts, over the
// members that bound r.
func (l *ledger) pool(r string) (p int64, bounded bool) {
	for _, k := range l.members {
		c := l.caps(k)
		if _, ok := c.nominal[r]; ok && !k.Removed {
			p = activities.SaturatingAdd(p, c.lendable(r))
			bounded = true
		}
	}
	return p, bounded
}

// poolUse is how much of the pool of r the members draw, with extra added to member
// m's use.
func (l *ledger) poolUse(r string, m *QuotaMember, extra int64, excl excluded, self string) int64 {
	var total int64
	for _, k := range l.members {
		c := l.caps(k)
		if _, ok := c.nominal[r]; !ok {
			continue
		}
		u := l.usage(k, excl, self)[r]
		if k == m {
			u = activities.SaturatingAdd(u, extra)
		}
		total = activities.SaturatingAdd(total, max(0, u-c.guaranteed(r)))
	}
	return total
}

// fits says whether a job of m asking for d fits now (with the excluded entries gone),
// or why not.
func (l *ledger) fits(m *QuotaMember, d resVec, excl excluded, self string) (bool, string) {
	c := l.caps(m)
	u := l.usage(m, excl, self)
	for _, r := range sortedKeys(c.nominal) {
		if activities.SaturatingAdd(u[r], d[r]) > l.ceiling(c, r) {
			if !l.cohort {
				return false, aloneMessage(r, d[r], u[r], c.nominal[r])
			}
			return false, fmt.Sprintf("%s: %s requested, %s in use, nominal %s, borrowing limit %s", r, describe(r, d[r]), describe(r, u[r]),
				describe(r, c.nominal[r]), describe(r, c.borrow[r]))
		}
	}
	if !l.cohort {
		return true, ""
	}
	for _, r := range sortedKeys(c.nominal) {
		p, _ := l.pool(r)
		if use := l.poolUse(r, m, d[r], excl, self); use > p {
			return false, fmt.Sprintf("%s: %s requested, the cohort's shared pool of %s is used up", r, describe(r, d[r]), describe(r, p))
		}
	}
	return true, ""
}

// withinNominal says whether m's use with d added stays within its nominal quota.
func (l *ledger) withinNominal(m *QuotaMember, d resVec, excl excluded, self string) bool {
	c := l.caps(m)
	u := l.usage(m, excl, self)
	for r, n := range c.nominal {
		if activities.SaturatingAdd(u[r], d[r]) > n {
			return false
		}
	}
	return true
}

// borrows says whether m uses more than its nominal quota of some resource.
func (l *ledger) borrows(m *QuotaMember, excl excluded) bool {
	c := l.caps(m)
	u := l.usage(m, excl, "")
	for r, n := range c.nominal {
		if u[r] > n {
			return true
		}
	}
	return false
}

// tooBig says why a job of m asking for d can never be admitted, or "".
func (l *ledger) tooBig(m *QuotaMember, d resVec) string {
	c := l.caps(m)
	for _, r := range sortedKeys(c.nominal) {
		most := l.ceiling(c, r)
		if l.cohort {
			p, _ := l.pool(r)
			most = min(most, activities.SaturatingAdd(c.guaranteed(r), p))
		}
		if d[r] > most {
			if !l.cohort {
				return "the job alone exceeds the workspace quota: " + aloneMessage(r, d[r], 0, c.nominal[r])
			}
			return fmt.Sprintf("the job alone exceeds what the workspace can hold in its cohort: %s: %s requested, at most %s",
				r, describe(r, d[r]), describe(r, most))
		}
	}
	return ""
}

// share is m's weighted dominant share of borrowed capacity with d added: the largest
// fraction of a pool it borrows, over its weight.
func (l *ledger) share(m *QuotaMember, d resVec) float64 {
	if !l.cohort {
		return 0
	}
	c := l.caps(m)
	u := l.usage(m, nil, "")
	best := 0.0
	for _, r := range sortedKeys(c.nominal) {
		borrowed := activities.SaturatingAdd(u[r], d[r]) - c.nominal[r]
		p, _ := l.pool(r)
		if borrowed <= 0 || p <= 0 {
			continue
		}
		best = max(best, float64(borrowed)/float64(p))
	}
	return best / m.Limits.weight()
}

// sortQueue orders a member's queue: priority (higher first), then arrival.
func sortQueue(q []QuotaEntry) {
	sort.SliceStable(q, func(i, j int) bool {
		if q[i].Priority != q[j].Priority {
			return q[i].Priority > q[j].Priority
		}
		return q[i].Seq < q[j].Seq
	})
}

// preemption is a victim the ledger chose.
type preemption struct {
	victim string
	notice QuotaPreemptNotice
}

// decided is what one admission pass decided: the decision of each job granted or
// rejected (in order), and the victims to tell.
type decided struct {
	order     []string
	decisions map[string]QuotaDecision
	preempt   []preemption
}

func (d *decided) add(id string, dec QuotaDecision) {
	if d.decisions == nil {
		d.decisions = map[string]QuotaDecision{}
	}
	d.order = append(d.order, id)
	d.decisions[id] = dec
}

// candidate is a member's queue head.
type candidate struct {
	m     *QuotaMember
	e     *QuotaEntry
	share float64
}

// admit grants queued jobs while they fit, rejects those that never can, and, when
// no head fits, chooses victims to preempt.
func (l *ledger) admit(now time.Time) decided {
	var out decided
	for _, m := range l.members {
		sortQueue(m.Queue)
	}
	l.unreserve()
	for {
		var cands []candidate
		for _, m := range l.members {
			for len(m.Queue) > 0 && !m.Removed {
				head := &m.Queue[0]
				why := l.tooBig(m, vecOf(head.Resources))
				if why == "" {
					cands = append(cands, candidate{m: m, e: head, share: l.share(m, vecOf(head.Resources))})
					break
				}
				out.add(head.JobID, QuotaDecision{Rejected: true, Message: why})
				m.Queue = m.Queue[1:]
			}
		}
		if len(cands) == 0 {
			break
		}
		sort.SliceStable(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if a.share != b.share {
				return a.share < b.share
			}
			if a.e.Priority != b.e.Priority {
				return a.e.Priority > b.e.Priority
			}
			return a.e.Seq < b.e.Seq
		})
		granted := false
		for _, c := range cands {
			if ok, _ := l.fits(c.m, vecOf(c.e.Resources), nil, c.e.JobID); !ok {
				continue
			}
			e := *c.e
			c.m.Queue = c.m.Queue[1:]
			msg := ""
			if e.Reserved {
				msg = "admitted after preempting " + DescribeJobs(c.m.Workspace, e.Victims)
			}
			if l.cohort && !l.withinNominal(c.m, vecOf(e.Resources), nil, e.JobID) {
				e.Borrowing = true
				if msg != "" {
					msg += "; "
				}
				msg += "borrowing idle quota of the cohort"
			}
			e.Reserved, e.Victims = false, nil
			e.Since = now
			c.m.Admitted = append(c.m.Admitted, e)
			c.m.recount()
			out.add(e.JobID, QuotaDecision{Granted: true, Message: msg})
			granted = true
			break
		}
		if granted {
			continue
		}
		for _, c := range cands {
			if !c.e.Reserved {
				out.preempt = append(out.preempt, l.preemptFor(c.m, c.e, now)...)
			}
		}
		break
	}
	return out
}

// unreserve lets a reserved job look for victims again once all of its victims are
// gone (released) and it still waits.
func (l *ledger) unreserve() {
	evicting := map[string]bool{}
	for _, m := range l.members {
		for _, e := range m.Admitted {
			if e.Evicting != nil {
				evicting[e.JobID] = true
			}
		}
	}
	for _, m := range l.members {
		for i := range m.Queue {
			e := &m.Queue[i]
			if !e.Reserved {
				continue
			}
			left := false
			for _, v := range e.Victims {
				left = left || evicting[v]
			}
			if !left {
				e.Reserved, e.Victims = false, nil
			}
		}
	}
}

// victim is an admitted job that may be preempted for a head.
type victim struct {
	m       *QuotaMember
	e       *QuotaEntry
	reclaim bool // another member's borrowed capacity, else a lower priority
}

// preemptFor chooses the fewest victims, in preemption order, whose going makes the
// queued job e of m fit, marks them Evicting and e Reserved, and returns the notices
// to send. It chooses none when no such set exists.
func (l *ledger) preemptFor(m *QuotaMember, e *QuotaEntry, now time.Time) []preemption {
	d := vecOf(e.Resources)
	var list []victim
	if l.cohort && m.Limits.Preemption.reclaim() != PreemptNever && l.withinNominal(m, d, nil, e.JobID) {
		for _, k := range l.members {
			if k == m {
				continue
			}
			for i := range k.Admitted {
				v := &k.Admitted[i]
				if v.Evicting != nil || (m.Limits.Preemption.reclaim() == PreemptLowerPriority && v.Priority >= e.Priority) {
					continue
				}
				list = append(list, victim{m: k, e: v, reclaim: true})
			}
		}
	}
	if m.Limits.Preemption.WithinWorkspace == PreemptLowerPriority {
		for i := range m.Admitted {
			v := &m.Admitted[i]
			if v.Evicting == nil && v.Priority < e.Priority {
				list = append(list, victim{m: m, e: v})
			}
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		switch {
		case a.reclaim != b.reclaim:
			return a.reclaim
		case a.e.Priority != b.e.Priority:
			return a.e.Priority < b.e.Priority
		case !a.e.Since.Equal(b.e.Since):
			return a.e.Since.After(b.e.Since)
		}
		return a.e.Seq > b.e.Seq
	})
	// Jobs already stopping for an earlier preemptor are as good as gone: their
	// capacity is promised to it, and its reservation counts that. Counting them as
	// well would take victims twice for the same capacity.
	excl := excluded{}
	for _, k := range l.members {
		for _, v := range k.Admitted {
			if v.Evicting != nil {
				excl[v.JobID] = true
			}
		}
	}
	if ok, _ := l.fits(m, d, excl, e.JobID); ok {
		return nil // what is already stopping makes room: wait for it
	}
	var chosen []victim
	fits := false
	for _, v := range list {
		if v.reclaim && !l.borrows(v.m, excl) {
			continue // its member no longer borrows: nothing of it to reclaim
		}
		excl[v.e.JobID] = true
		chosen = append(chosen, v)
		if ok, _ := l.fits(m, d, excl, e.JobID); ok {
			fits = true
			break
		}
	}
	if !fits {
		return nil
	}
	var out []preemption
	for _, v := range chosen {
		// A job of another workspace is not named: its name is that tenant's.
		reason, msg := "Reclaimed", fmt.Sprintf("preempted to give workspace %s back its own quota, which your workspace borrowed", m.Workspace)
		if !v.reclaim {
			reason, msg = "PreemptedByPriority", fmt.Sprintf("preempted by job %s of priority %d (yours is %d)", JobNameOf(e.JobID), e.Priority, v.e.Priority)
		}
		v.e.Evicting = &QuotaEviction{By: e.JobID, ByWorkspace: m.Workspace, Reason: reason, Since: now}
		e.Victims = append(e.Victims, v.e.JobID)
		out = append(out, preemption{victim: v.e.JobID, notice: QuotaPreemptNotice{
			By: e.JobID, ByWorkspace: m.Workspace, Reason: reason, Message: msg}})
	}
	e.Reserved = true
	return out
}

// recount sets the member's use to the sum of its admitted jobs' shares. A saturated
// sum (activities.SaturatingAdd) less a share is not the use of the others, so the use
// is added up again rather than subtracted from.
func (m *QuotaMember) recount() {
	var used Amounts
	for _, e := range m.Admitted {
		used = used.Add(e.Resources)
	}
	m.Used = used
}

// waitReason says why a queued job waits and where it stands in its member's queue.
func (l *ledger) waitReason(m *QuotaMember, jobID string) (QuotaDecision, bool) {
	for i, e := range m.Queue {
		if e.JobID != jobID {
			continue
		}
		var why string
		switch {
		case i > 0:
			why = fmt.Sprintf("%d job(s) ahead in the workspace queue", i)
		case e.Reserved:
			why = fmt.Sprintf("preempting %s; admitted once they have stopped", DescribeJobs(m.Workspace, e.Victims))
		default:
			_, why = l.fits(m, vecOf(e.Resources), nil, e.JobID)
		}
		return QuotaDecision{Position: i + 1, Message: "waiting for workspace quota: " + why}, true
	}
	return QuotaDecision{}, false
}

// amountsOf is vecOf's inverse.
func amountsOf(v resVec) Amounts {
	a := Amounts{GPU: v[resGPU], MilliCPU: v[resCPU], MemoryBytes: v[resMemory]}
	for r, n := range v {
		if model, ok := strings.CutPrefix(r, resGPUModel); ok && n != 0 {
			if a.GPUModels == nil {
				a.GPUModels = map[string]int64{}
			}
			a.GPUModels[model] = n
		}
	}
	return a
}

// MemberFigures are one member's figures in a quota view: its nominal quota (the
// resources it bounds), what it uses, borrows and lends, and its weighted dominant
// share of borrowed capacity.
type MemberFigures struct {
	Workspace string
	Nominal   Amounts
	Used      Amounts
	Borrowed  Amounts
	Lent      Amounts
	Share     float64
}

// QuotaFigures are a quota view's figures: the pool (the members' lendable quota, by
// resource) and each member's. What members borrow is attributed to the lenders in
// proportion to the idle part of their lendable quota.
func QuotaFigures(v QuotaView) (pool Amounts, members []MemberFigures) {
	l := &ledger{cohort: v.Workspace == ""}
	if v.Workspace != "" {
		l.members = []*QuotaMember{{Workspace: v.Workspace, Limits: v.Limits, Used: v.Used, Admitted: v.Admitted, Queue: v.Queue}}
	} else {
		for i := range v.Members {
			l.members = append(l.members, &v.Members[i])
		}
	}
	poolVec, borrowed, idle := resVec{}, map[string]resVec{}, map[string]resVec{}
	total, idleTotal := resVec{}, resVec{}
	for _, m := range l.members {
		c := l.caps(m)
		u := vecOf(m.Used)
		borrowed[m.Workspace], idle[m.Workspace] = resVec{}, resVec{}
		for r, n := range c.nominal {
			if !l.cohort {
				continue
			}
			if !m.Removed {
				poolVec[r] = activities.SaturatingAdd(poolVec[r], c.lendable(r))
			}
			if b := u[r] - n; b > 0 {
				borrowed[m.Workspace][r] = b
				total[r] = activities.SaturatingAdd(total[r], b)
			}
			if i := min(c.lendable(r), max(0, n-u[r])); i > 0 {
				idle[m.Workspace][r] = i
				idleTotal[r] = activities.SaturatingAdd(idleTotal[r], i)
			}
		}
	}
	for _, m := range l.members {
		c := l.caps(m)
		lent := resVec{}
		for r, i := range idle[m.Workspace] {
			if total[r] > 0 && idleTotal[r] > 0 {
				lent[r] = int64(float64(total[r]) * float64(i) / float64(idleTotal[r]))
			}
		}
		members = append(members, MemberFigures{
			Workspace: m.Workspace, Nominal: amountsOf(c.nominal), Used: m.Used,
			Borrowed: amountsOf(borrowed[m.Workspace]), Lent: amountsOf(lent), Share: l.share(m, nil),
		})
	}
	return amountsOf(poolVec), members
}

// JobNameOf is the name in a job's workflow id (JobWorkflowID), and WorkspaceOfJob
// its workspace.
func JobNameOf(id string) string {
	if i := strings.LastIndex(id, "/job/"); i >= 0 {
		return id[i+len("/job/"):]
	}
	return id
}

// WorkspaceOfJob is the workspace in a job's workflow id (JobWorkflowID).
func WorkspaceOfJob(id string) string {
	ws, _, _ := strings.Cut(strings.TrimPrefix(id, quotaPrefix), "/")
	return ws
}

// DescribeJobs names the jobs (workflow ids) as workspace ws may read them: its own by
// name, another workspace's only by count ("1 job of workspace b").
func DescribeJobs(ws string, ids []string) string {
	var own []string
	others := map[string]int{}
	for _, id := range ids {
		if w := WorkspaceOfJob(id); w != ws {
			others[w]++
			continue
		}
		own = append(own, JobNameOf(id))
	}
	parts := own
	names := make([]string, 0, len(others))
	for w := range others {
		names = append(names, w)
	}
	sort.Strings(names)
	for _, w := range names {
		parts = append(parts, fmt.Sprintf("%d job(s) of workspace %s", others[w], w))
	}
	return strings.Join(parts, ", ")
}
