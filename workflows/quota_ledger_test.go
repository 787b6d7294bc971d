package workflows

import (
	"slices"
	"testing"
	"time"
)

// cohortOf builds a cohort ledger of members with the given nominal GPU quotas.
func cohortOf(limits map[string]QuotaLimits) *ledger {
	l := &ledger{cohort: true}
	names := make([]string, 0, len(limits))
	for ws := range limits {
		names = append(names, ws)
	}
	slices.Sort(names)
	for _, ws := range names {
		l.members = append(l.members, &QuotaMember{Workspace: ws, Limits: limits[ws]})
	}
	return l
}

var seq int64

// ask queues a job of n GPUs (model, if given) in member ws.
func (l *ledger) ask(ws, job string, n int64, prio int32, model ...string) {
	seq++
	e := QuotaEntry{JobID: job, Priority: prio, Resources: Amounts{GPU: n}, Seq: seq}
	if len(model) > 0 {
		e.Resources.GPUModels = map[string]int64{model[0]: n}
	}
	for _, m := range l.members {
		if m.Workspace == ws {
			m.Queue = append(m.Queue, e)
			return
		}
	}
	panic("no member " + ws)
}

func (l *ledger) releaseJob(job string) {
	q := &quotaWorkflow{members: l.members, state: QuotaView{Cohort: "c"}}
	q.release(job)
}

func (l *ledger) admittedIn(ws string) []string {
	var ids []string
	for _, m := range l.members {
		if m.Workspace == ws {
			for _, e := range m.Admitted {
				ids = append(ids, e.JobID)
			}
		}
	}
	return ids
}

func (l *ledger) entry(job string) *QuotaEntry {
	for _, m := range l.members {
		for i := range m.Admitted {
			if m.Admitted[i].JobID == job {
				return &m.Admitted[i]
			}
		}
		for i := range m.Queue {
			if m.Queue[i].JobID == job {
				return &m.Queue[i]
			}
		}
	}
	return nil
}

var t0 = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

// A member borrows what the others leave idle, up to its borrowing limit; the other
// members' lending limits keep part of their quota theirs alone.
func TestCohortBorrowsWithinItsLimits(t *testing.T) {
	l := cohortOf(map[string]QuotaLimits{
		"a": {GPU: new(int64(4)), Cohort: "c", Borrowing: &QuotaCaps{GPU: new(int64(3))}},
		"b": {GPU: new(int64(4)), Cohort: "c", Lending: &QuotaCaps{GPU: new(int64(2))}},
		"c": {GPU: new(int64(4)), Cohort: "c"},
	})
	l.ask("a", "a1", 4, 0) // its own
	l.ask("a", "a2", 2, 0) // borrows 2
	l.ask("a", "a3", 2, 0) // would borrow 4: past its borrowing limit of 3
	out := l.admit(t0)
	if got := l.admittedIn("a"); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("admitted %v, want a1 a2 (a3 past the borrowing limit)", got)
	}
	if !out.decisions["a2"].Granted || !l.entry("a2").Borrowing || l.entry("a1").Borrowing {
		t.Errorf("a2 should be marked borrowing and a1 not: %+v %+v", l.entry("a1"), l.entry("a2"))
	}
	if _, why := l.fits(l.members[0], vecOf(Amounts{GPU: 2}), nil, "a3"); why == "" {
		t.Error("a3 fits past the borrowing limit")
	}

	// c borrows: pool = 4 (a) + 2 (b lends 2) + 4 (c) = 10; guaranteed b 2.
	// a draws 6 of the pool, so c can use its own 4 and nothing more: b's guaranteed 2
	// stay b's.
	l.ask("c", "c1", 4, 0)
	l.ask("c", "c2", 1, 0)
	l.admit(t0)
	if got := l.admittedIn("c"); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("c admitted %v, want c1 only (the pool is used up; b's guaranteed part is not lent)", got)
	}
	l.ask("b", "b1", 2, 0)
	l.admit(t0)
	if got := l.admittedIn("b"); !slices.Equal(got, []string{"b1"}) {
		t.Errorf("b admitted %v: its guaranteed part must be free for it", got)
	}
	pool, figures := QuotaFigures(QuotaView{Cohort: "c", Members: derefMembers(l.members)})
	if pool.GPU != 10 {
		t.Errorf("pool %d GPUs, want 10", pool.GPU)
	}
	if figures[0].Borrowed.GPU != 2 || figures[1].Borrowed.GPU != 0 {
		t.Errorf("borrowed %+v", figures)
	}
	if lent := figures[1].Lent.GPU + figures[2].Lent.GPU; lent != 2 {
		t.Errorf("lent %d in all, want the 2 a borrows", lent)
	}
}

func derefMembers(ms []*QuotaMember) []QuotaMember {
	var out []QuotaMember
	for _, m := range ms {
		out = append(out, *m)
	}
	return out
}

// A member that needs its own quota back reclaims it from a borrower: the lowest
// priority, most recently admitted borrowing job first, only as many as needed; the
// reclaimer waits (reserved) until the victims release, and nobody else takes it.
func TestCohortReclaimsBorrowedQuota(t *testing.T) {
	l := cohortOf(map[string]QuotaLimits{"a": {GPU: new(int64(4)), Cohort: "c"}, "b": {GPU: new(int64(4)), Cohort: "c"}})
	l.ask("a", "a-old", 2, 5)
	l.ask("a", "a-low", 2, 0)
	l.ask("a", "a-mid", 2, 5)
	l.ask("a", "a-new", 2, 5)
	l.admit(t0)
	l.admit(t0.Add(time.Minute)) // nothing changes: still four admitted
	if got := l.admittedIn("a"); len(got) != 4 {
		t.Fatalf("a admitted %v, want all four (8 GPUs: its 4 and b's idle 4)", got)
	}
	// Admission times: a-old first... set distinct ones to test "most recent first".
	for i, id := range []string{"a-old", "a-mid", "a-new", "a-low"} {
		l.entry(id).Since = t0.Add(time.Duration(i) * time.Minute)
	}
	l.ask("b", "b1", 3, 0)
	out := l.admit(t0.Add(time.Hour))
	var victims []string
	for _, p := range out.preempt {
		victims = append(victims, p.victim)
		if p.notice.Reason != "Reclaimed" || p.notice.By != "b1" || p.notice.ByWorkspace != "b" {
			t.Errorf("notice %+v", p.notice)
		}
	}
	// b needs 3: a-low (lowest priority) and then a-new (most recent of priority 5).
	if !slices.Equal(victims, []string{"a-low", "a-new"}) {
		t.Fatalf("victims %v, want a-low then a-new", victims)
	}
	if e := l.entry("b1"); !e.Reserved || !slices.Equal(e.Victims, victims) {
		t.Fatalf("b1 not reserved for its victims: %+v", e)
	}
	// Nobody takes what is freed while b1 waits: a asks for 2 more, and after a-low
	// releases (2 free), the 2 go neither to a's new job nor to b1 (it needs 3).
	l.ask("a", "a-late", 2, 10)
	l.releaseJob("a-low")
	out = l.admit(t0.Add(2 * time.Hour))
	if len(out.order) != 0 || len(out.preempt) != 0 {
		t.Fatalf("decided %+v while b1 waits for a-new", out)
	}
	l.releaseJob("a-new")
	out = l.admit(t0.Add(3 * time.Hour))
	if !out.decisions["b1"].Granted || l.entry("b1").Borrowing {
		t.Fatalf("b1 after its victims released: %+v", out.decisions)
	}
	if out.decisions["a-late"].Granted {
		t.Error("a-late admitted: a already borrows b's quota")
	}
}

// reclaimWithinCohort LowerPriority spares borrowers of equal or higher priority;
// Never spares every borrower. Any job of a borrowing member is a candidate (which
// job "is" the borrowed one is not told apart), lowest priority first, then newest.
func TestCohortReclaimPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   []string
	}{{PreemptLowerPriority, []string{"a-low"}}, {PreemptNever, nil}, {"", []string{"a-low", "a-high"}}} {
		l := cohortOf(map[string]QuotaLimits{
			"a": {GPU: new(int64(2)), Cohort: "c"},
			"b": {GPU: new(int64(4)), Cohort: "c", Preemption: QuotaPreemption{ReclaimWithinCohort: tc.policy}},
		})
		l.ask("a", "a-own", 2, 9)
		l.ask("a", "a-high", 2, 9)
		l.ask("a", "a-low", 2, 0)
		l.admit(t0)
		l.ask("b", "b1", 4, 5)
		var victims []string
		for _, p := range l.admit(t0).preempt {
			victims = append(victims, p.victim)
		}
		if tc.policy == PreemptLowerPriority {
			// a-low alone frees too little (b needs 4): no preemption at all.
			if victims != nil {
				t.Errorf("LowerPriority: victims %v, want none (a-high may not be taken, a-low alone is not enough)", victims)
			}
			continue
		}
		if !slices.Equal(victims, tc.want) {
			t.Errorf("policy %q: victims %v, want %v", tc.policy, victims, tc.want)
		}
	}
}

// A workspace with withinWorkspace LowerPriority lets a higher-priority job preempt
// its own lower-priority jobs; by default it waits.
func TestPriorityPreemptionWithinAWorkspace(t *testing.T) {
	for _, policy := range []string{"", PreemptLowerPriority} {
		l := &ledger{members: []*QuotaMember{{Workspace: "ws", Limits: QuotaLimits{GPU: new(int64(4)),
			Preemption: QuotaPreemption{WithinWorkspace: policy}}}}}
		l.ask("ws", "low", 2, 0)
		l.ask("ws", "mid", 2, 3)
		l.admit(t0)
		l.ask("ws", "urgent", 2, 10)
		out := l.admit(t0)
		var victims []string
		for _, p := range out.preempt {
			victims = append(victims, p.victim)
			if p.notice.Reason != "PreemptedByPriority" {
				t.Errorf("reason %q", p.notice.Reason)
			}
		}
		want := []string(nil)
		if policy == PreemptLowerPriority {
			want = []string{"low"}
		}
		if !slices.Equal(victims, want) {
			t.Errorf("policy %q: victims %v, want %v", policy, victims, want)
		}
	}
}

// Idle capacity goes to the member with the lowest weighted dominant share of
// borrowed capacity: with weights 2:1, a borrows about twice what b does.
func TestCohortFairSharingByWeight(t *testing.T) {
	l := cohortOf(map[string]QuotaLimits{
		"a":    {GPU: new(int64(0)), Cohort: "c", Weight: 2},
		"b":    {GPU: new(int64(0)), Cohort: "c"},
		"idle": {GPU: new(int64(9)), Cohort: "c"},
	})
	for i := range 9 {
		l.ask("a", "a"+string(rune('0'+i)), 1, 0)
		l.ask("b", "b"+string(rune('0'+i)), 1, 0)
	}
	l.admit(t0)
	a, b := len(l.admittedIn("a")), len(l.admittedIn("b"))
	if a != 6 || b != 3 {
		t.Errorf("admitted a %d, b %d of 9 idle GPUs; want 6 and 3 (weights 2:1)", a, b)
	}
}

// GPUs of a model count against that model's quota as well as the GPU total.
func TestGPUModelQuota(t *testing.T) {
	l := &ledger{members: []*QuotaMember{{Workspace: "ws", Limits: QuotaLimits{GPU: new(int64(8)),
		GPUModels: map[string]int64{"A100": 2}}}}}
	l.ask("ws", "a100-1", 2, 0, "A100")
	l.ask("ws", "a100-2", 1, 0, "A100")
	l.ask("ws", "h100", 1, 0, "H100")
	out := l.admit(t0)
	if !out.decisions["a100-1"].Granted || out.decisions["a100-2"].Granted {
		t.Fatalf("decisions %+v: want a100-1 admitted and a100-2 waiting for the A100 quota", out.decisions)
	}
	// The head waits for A100s and is not overtaken within the workspace.
	if out.decisions["h100"].Granted {
		t.Error("h100 overtook the workspace queue's head")
	}
	d, _ := l.waitReason(l.members[0], "a100-2")
	if want := "gpu/A100: 1 requested, 2 of 2 in use"; d.Message != "waiting for workspace quota: "+want {
		t.Errorf("wait reason %q, want %q", d.Message, want)
	}
	l.ask("ws", "too-big", 3, 0, "A100")
	l.releaseJob("a100-2")
	l.releaseJob("h100")
	out = l.admit(t0)
	if d := out.decisions["too-big"]; !d.Rejected {
		t.Errorf("3 A100s against a quota of 2: %+v, want rejected", d)
	}
}

// Two members reclaiming in one pass do not take victims twice for the same capacity:
// the jobs already stopping for the first are set aside when the second looks, and if
// they make room for both, the second preempts nobody (found by the fair-sharing
// scenario, docs/quota-benchmark.md).
func TestReclaimDoesNotCountStoppingJobsTwice(t *testing.T) {
	l := cohortOf(map[string]QuotaLimits{
		"x": {GPU: new(int64(8)), Cohort: "c"}, "y": {GPU: new(int64(8)), Cohort: "c"}, "z": {GPU: new(int64(8)), Cohort: "c"},
	})
	for _, j := range []struct {
		ws, id string
		n      int64
	}{{"y", "y1", 4}, {"y", "y2", 4}, {"y", "y3", 4}, {"y", "y4", 2}, {"x", "x1", 4}, {"z", "z1", 6}} {
		l.ask(j.ws, j.id, j.n, 0)
	}
	l.admit(t0)
	for i, id := range []string{"y1", "y2", "y3", "y4"} {
		l.entry(id).Since = t0.Add(time.Duration(i) * time.Minute)
	}
	l.ask("x", "x2", 4, 0)
	l.ask("z", "z3", 2, 0)
	var victims []string
	for _, p := range l.admit(t0.Add(time.Hour)).preempt {
		victims = append(victims, p.victim)
	}
	if !slices.Equal(victims, []string{"y4", "y3"}) {
		t.Fatalf("victims %v, want y4 and y3 only (y back at its nominal 8)", victims)
	}
	l.releaseJob("y4")
	l.releaseJob("y3")
	out := l.admit(t0.Add(2 * time.Hour))
	if !out.decisions["x2"].Granted || !out.decisions["z3"].Granted {
		t.Errorf("after the victims stopped: %+v, want x2 and z3 admitted", out.decisions)
	}
}
