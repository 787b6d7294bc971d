package console

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events"
)

// Audit records the workspace page shows: the latest auditShown of the last
// auditWindow.
const (
	auditShown  = 50
	auditWindow = 7 * 24 * time.Hour
)

// auditRow is one audit record on the workspace page.
type auditRow struct {
	Time time.Time
	events.AuditData
}

// workspaceData is the workspace page's.
type workspaceData struct {
	Workspace *api.Workspace
	Quota     *api.QuotaStatus
	// Admin says the session may see the workspace's tokens and audit records: a
	// workspace admin of this workspace, or an admin.
	Admin  bool
	Tokens []api.Token
	// Audit is nil when the console has no audit reader.
	Audit     []auditRow
	HasAudit  bool
	AuditDays int
	Now       time.Time
}

// workspacePage shows a workspace: its registry entry, its quota with what is
// admitted against it and what waits in its queue; to its administrators, its tokens
// and its latest audit records.
//
// The registry entry, quota and tokens come from the API with the session's token, so
// another workspace's page is the API's 404. Audit records have no API route: they
// are read from the audit stream, and shown only to a session whose token the API
// lets manage this workspace's tokens (auth.VerbTokens in the workspace), after the
// API has answered for the workspace.
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
	d := workspaceData{Workspace: ws, Quota: q, Now: time.Now(), AuditDays: int(auditWindow / (24 * time.Hour)),
		Admin: auth.InWorkspace(k.s.who, k.ws) && auth.Allows(k.s.who.Role, auth.VerbTokens)}
	if d.Admin {
		toks, err := k.api.ListTokens(ctx, k.ws)
		if err != nil {
			return err
		}
		d.Tokens = toks.Items
		if c.opts.Audit != nil {
			d.HasAudit = true
			recs, err := c.opts.Audit(ctx, k.ws, auditWindow, auditShown)
			if err != nil {
				return err
			}
			for _, ev := range recs {
				var a events.AuditData
				if json.Unmarshal(ev.Data, &a) == nil {
					d.Audit = append(d.Audit, auditRow{Time: ev.Time, AuditData: a})
				}
			}
		}
	}
	return c.render(w, http.StatusOK, "workspace", "", k.page("Workspace "+k.ws, "workspace", d))
}
