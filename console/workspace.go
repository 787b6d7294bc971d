package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/client"
)

// Audit records the workspace page shows: the latest auditShown of the last
// auditWindow.
const (
	auditShown  = 50
	auditWindow = 7 * 24 * time.Hour
)

// workspaceData is the workspace page's.
type workspaceData struct {
	Workspace *api.Workspace
	Quota     *api.QuotaStatus
	// QuotaRows are the quota's figures per resource: gpu, each GPU model, cpu and
	// memory.
	QuotaRows []quotaRow
	// Reclaim and WithinWorkspace are the preemption policy, defaults spelled out.
	Reclaim, WithinWorkspace string
	// Admin says the session may see the workspace's tokens and audit records: a
	// workspace admin of this workspace, or an admin.
	Admin  bool
	Tokens []api.Token
	// Audit are the latest audit records, newest first; HasAudit says the API
	// answered them (a server started without JetStream serves none).
	Audit     []api.AuditRecord
	HasAudit  bool
	AuditDays int
	Now       time.Time
}

// workspacePage shows a workspace: its registry entry, its quota with what is
// admitted against it and what waits in its queue; to its administrators, its tokens
// and its latest audit records.
//
// Everything comes from the API with the session's token, so another workspace's page
// is the API's 404. The tokens and audit records (GET /v1/workspaces/{ws}/audit) are
// asked for only when the session's token may manage this workspace's tokens
// (auth.VerbTokens in the workspace), which is what the API requires of both.
func (c *Console) workspacePage(w http.ResponseWriter, r *http.Request, k *call) error {
	ctx := r.Context()
	ws, err := k.api.GetWorkspace(ctx, k.ws)
	if err != nil {
		return err
	}
	q, err := k.api.GetQuota(ctx, k.ws)
	if err != nil {
		return err
	}
	d := workspaceData{Workspace: ws, Quota: q, QuotaRows: quotaRows(q), Reclaim: "Any", WithinWorkspace: "Never",
		Now: time.Now(), AuditDays: int(auditWindow / (24 * time.Hour)),
		Admin: auth.InWorkspace(k.s.who, k.ws) && auth.Allows(k.s.who.Role, auth.VerbTokens)}
	if p := q.Limits.Preemption; p != nil {
		d.Reclaim, d.WithinWorkspace = orDefault(p.ReclaimWithinCohort, d.Reclaim), orDefault(p.WithinWorkspace, d.WithinWorkspace)
	}
	if d.Admin {
		toks, err := k.api.ListTokens(ctx, k.ws)
		if err != nil {
			return err
		}
		d.Tokens = toks.Items
		recs, err := k.api.Audit(ctx, k.ws, client.AuditOptions{Since: auditWindow, Limit: auditShown})
		switch ae, _ := errors.AsType[*client.Error](err); {
		case err == nil:
			d.HasAudit, d.Audit = true, recs.Items
		case ae != nil && ae.Status == http.StatusServiceUnavailable:
			// A server started without JetStream serves no audit records: the section
			// is left out.
		default:
			return err
		}
	}
	return c.render(w, http.StatusOK, "workspace", "", k.page("Workspace "+k.ws, "workspace", d))
}

// quotaRow is one resource's quota figures, written for the page: Nominal
// "unlimited" for no limit, BorrowingLimit "unbounded" and LendingLimit "all" where
// the quota sets none.
type quotaRow struct {
	// Resource is gpu, gpu/MODEL, cpu or memory; Label the row's heading.
	Resource, Label                                             string
	Nominal, Used, Borrowed, Lent, BorrowingLimit, LendingLimit string
}

// quotaRows are a quota's figures per resource: gpu, then each GPU model the limits
// or the figures name, then cpu and memory.
func quotaRows(st *api.QuotaStatus) []quotaRow {
	l := st.Limits
	count := func(p *int64, none string) string {
		if p == nil {
			return none
		}
		return strconv.FormatInt(*p, 10)
	}
	limit := func(lim *api.QuotaLimit, none string, get func(*api.QuotaLimit) string) string {
		if lim == nil {
			return none
		}
		return orDefault(get(lim), none)
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	rows := []quotaRow{{Resource: "gpu", Label: "GPUs", Nominal: count(l.GPU, "unlimited"), Used: n(st.Used.GPU),
		Borrowed: n(st.Borrowed.GPU), Lent: n(st.Lent.GPU),
		BorrowingLimit: limit(l.BorrowingLimit, "unbounded", func(q *api.QuotaLimit) string { return count(q.GPU, "") }),
		LendingLimit:   limit(l.LendingLimit, "all", func(q *api.QuotaLimit) string { return count(q.GPU, "") })}}
	for _, m := range st.GPUModelNames() {
		model := func(q *api.QuotaLimit) string {
			if v, ok := q.GPUModels[m]; ok {
				return n(v)
			}
			return ""
		}
		nominal := "unlimited"
		if v, ok := l.GPUModels[m]; ok {
			nominal = n(v)
		}
		rows = append(rows, quotaRow{Resource: "gpu/" + m, Label: "GPUs " + m, Nominal: nominal, Used: n(st.Used.GPUModels[m]),
			Borrowed: n(st.Borrowed.GPUModels[m]), Lent: n(st.Lent.GPUModels[m]),
			BorrowingLimit: limit(l.BorrowingLimit, "unbounded", model), LendingLimit: limit(l.LendingLimit, "all", model)})
	}
	cpu := func(q *api.QuotaLimit) string { return q.CPU }
	mem := func(q *api.QuotaLimit) string { return q.Memory }
	return append(rows,
		quotaRow{Resource: "cpu", Label: "CPU", Nominal: orDefault(l.CPU, "unlimited"), Used: orDefault(st.Used.CPU, "0"),
			Borrowed: orDefault(st.Borrowed.CPU, "0"), Lent: orDefault(st.Lent.CPU, "0"),
			BorrowingLimit: limit(l.BorrowingLimit, "unbounded", cpu), LendingLimit: limit(l.LendingLimit, "all", cpu)},
		quotaRow{Resource: "memory", Label: "Memory", Nominal: orDefault(l.Memory, "unlimited"), Used: orDefault(st.Used.Memory, "0"),
			Borrowed: orDefault(st.Borrowed.Memory, "0"), Lent: orDefault(st.Lent.Memory, "0"),
			BorrowingLimit: limit(l.BorrowingLimit, "unbounded", mem), LendingLimit: limit(l.LendingLimit, "all", mem)})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// formPriority reads the priority form's value: a whole number from -1000 to 1000.
func formPriority(v string) (int64, bool) {
	p, err := strconv.ParseInt(v, 10, 32)
	return p, err == nil && p >= -1000 && p <= 1000
}

// setJobPriority changes the priority of a job the quota holds (the queue's form),
// then shows the workspace page again.
func (c *Console) setJobPriority(w http.ResponseWriter, r *http.Request, k *call) error {
	v := strings.TrimSpace(r.PostFormValue("priority"))
	p, ok := formPriority(v)
	if !ok {
		// The form's mistake is answered with a page of its own, not as a failure.
		c.errorPage(w, r, k.s, http.StatusUnprocessableEntity, fmt.Sprintf("priority %q: want a whole number from -1000 to 1000", v))
		return nil
	}
	if _, err := k.api.SetJobPriority(r.Context(), k.ws, r.PathValue("name"), int32(p)); err != nil {
		return err
	}
	http.Redirect(w, r, wsPath(k.ws, "workspace")+"#queue-h", http.StatusSeeOther)
	return nil
}
