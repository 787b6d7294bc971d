package console

import (
	"errors"
	"net/http"
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
	d := workspaceData{Workspace: ws, Quota: q, Now: time.Now(), AuditDays: int(auditWindow / (24 * time.Hour)),
		Admin: auth.InWorkspace(k.s.who, k.ws) && auth.Allows(k.s.who.Role, auth.VerbTokens)}
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
