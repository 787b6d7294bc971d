package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Tokens is the token service over the token store (auth.Store): create, list and
// revoke tokens.
type Tokens struct{ store *auth.Store }

// NewTokens returns the token service over store.
func NewTokens(store *auth.Store) *Tokens { return &Tokens{store: store} }

// Create creates a token for the caller by and returns it with its secret, which
// cannot be shown again. An invalid request is ErrInvalidObject (a workspace that does
// not exist is one of its fields at fault), a name in use ErrAlreadyExists. A caller
// of one workspace (a workspace admin) creates tokens of that workspace only
// (ErrPermissionDenied otherwise, naming the field), and none that outlives its own
// token: without a ttl or expiresAt the new token expires with the caller's.
func (s *Tokens) Create(ctx context.Context, req api.TokenRequest, by api.Identity) (api.CreatedToken, error) {
	if by.Workspace != api.AllWorkspaces {
		if req.Workspace != by.Workspace {
			return api.CreatedToken{}, &Error{Kind: ErrPermissionDenied,
				Message: fmt.Sprintf("token %s manages the tokens of workspace %s only", by.Name, by.Workspace),
				Fields:  []schemas.FieldError{{Field: "workspace", Detail: "must be " + by.Workspace}}}
		}
		if err := capExpiry(&req, by, s.store.Now()); err != nil {
			return api.CreatedToken{}, err
		}
	}
	tok, err := s.store.CreateToken(ctx, req, by.Name)
	if err != nil {
		return api.CreatedToken{}, storeError("create token", err)
	}
	return tok, nil
}

// capExpiry keeps a token made by a caller whose own token expires from outliving it:
// with no ttl or expiresAt the request gets the caller's expiry; a later one is
// ErrInvalidObject naming the field.
func capExpiry(req *api.TokenRequest, by api.Identity, now time.Time) error {
	if by.ExpiresAt == nil {
		return nil
	}
	limit := by.ExpiresAt.UTC()
	field, expires := "ttl", now.Add(auth.DefaultTTL)
	switch {
	case req.ExpiresAt != nil:
		field, expires = "expiresAt", *req.ExpiresAt
	case req.TTL != 0:
		expires = now.Add(req.TTL.D())
	default:
		if expires.After(limit) {
			req.ExpiresAt = &limit
		}
		return nil
	}
	if expires.After(limit) {
		return &Error{Kind: ErrInvalidObject, Message: "create token: 1 problem(s)", Fields: []schemas.FieldError{{
			Field: field, Detail: "must not end after the creating token's expiry, " + limit.Format(time.RFC3339)}}}
	}
	return nil
}

// List lists the tokens, sorted by name, without their secrets; with workspace set,
// only that workspace's. A caller of one workspace lists that workspace's tokens only
// (another workspace answers ErrNotFound, as if it did not exist).
func (s *Tokens) List(ctx context.Context, workspace string, by api.Identity) (api.TokenList, error) {
	if by.Workspace != api.AllWorkspaces {
		if workspace != "" && workspace != by.Workspace {
			return api.TokenList{}, &Error{Kind: ErrNotFound, Message: fmt.Sprintf("workspace %s not found", workspace)}
		}
		workspace = by.Workspace
	}
	toks, err := s.store.ListTokens(ctx, workspace)
	if err != nil {
		return api.TokenList{}, fmt.Errorf("list tokens: %w", err)
	}
	if toks == nil {
		toks = []api.Token{}
	}
	return api.TokenList{Items: toks}, nil
}

// Revoke revokes the token of that name; it stops working at once. ErrNotFound when
// there is none, or when a caller of one workspace names another workspace's token.
func (s *Tokens) Revoke(ctx context.Context, name string, by api.Identity) error {
	if by.Workspace != api.AllWorkspaces {
		tok, err := s.store.GetToken(ctx, name)
		if err != nil {
			return storeError("revoke token", err)
		}
		if tok.Workspace != by.Workspace {
			return &Error{Kind: ErrNotFound, Message: fmt.Sprintf("token %s not found", name)}
		}
	}
	if err := s.store.RevokeToken(ctx, name); err != nil {
		return storeError("revoke token", err)
	}
	return nil
}

// Workspaces is the workspace service over the registry of the token store
// (auth.Store): create, get, list and delete workspaces.
type Workspaces struct {
	store *auth.Store
	// temporal lists what a workspace holds before it is deleted.
	temporal *temporalBase
	// jobs says which jobs were deleted (their records stay; they hold nothing).
	jobs *Jobs
}

// NewWorkspaces returns the workspace service over store; svc (New) says what each
// workspace holds.
func NewWorkspaces(store *auth.Store, svc *Service) *Workspaces {
	return &Workspaces{store: store, temporal: svc.Jobs.temporalBase, jobs: svc.Jobs}
}

// Create registers a workspace for createdBy; its namespace defaults to its name. An
// invalid workspace is ErrInvalidObject, an existing name ErrAlreadyExists.
func (s *Workspaces) Create(ctx context.Context, ws api.Workspace, createdBy string) (api.Workspace, error) {
	created, err := s.store.CreateWorkspace(ctx, api.Workspace{Name: ws.Name, Namespace: ws.Namespace, PodDefaults: ws.PodDefaults, Storage: ws.Storage, Description: ws.Description}, createdBy)
	if err != nil {
		return api.Workspace{}, storeError("create workspace", err)
	}
	return created, nil
}

// Get answers a workspace; ErrNotFound when there is none.
func (s *Workspaces) Get(ctx context.Context, name string) (api.Workspace, error) {
	ws, err := s.store.GetWorkspace(ctx, name)
	if err != nil {
		return api.Workspace{}, storeError("get workspace", err)
	}
	return ws, nil
}

// List answers the workspaces the identity may see: every one for a token of all
// workspaces, its own otherwise (none if it no longer exists).
func (s *Workspaces) List(ctx context.Context, id api.Identity) (api.WorkspaceList, error) {
	list := api.WorkspaceList{Items: []api.Workspace{}}
	if id.Workspace == api.AllWorkspaces {
		all, err := s.store.ListWorkspaces(ctx)
		if err != nil {
			return api.WorkspaceList{}, fmt.Errorf("list workspaces: %w", err)
		}
		list.Items = append(list.Items, all...)
		return list, nil
	}
	ws, err := s.store.GetWorkspace(ctx, id.Workspace)
	switch {
	case err == nil:
		list.Items = append(list.Items, ws)
	case !errors.Is(err, auth.ErrNotFound):
		return api.WorkspaceList{}, fmt.Errorf("list workspaces: %w", err)
	}
	return list, nil
}

// Delete deletes a workspace and revokes its tokens. A workspace that still holds
// objects of a kind whose registration says they keep it (serviceKinds, kinds.go:
// jobs, experiments, pipeline runs, live schedules) is ErrConflict naming them (delete
// them first); one that does not exist ErrNotFound.
func (s *Workspaces) Delete(ctx context.Context, name string) error {
	if _, err := s.Get(ctx, name); err != nil {
		return err
	}
	var held []string
	for _, k := range serviceKinds {
		if !k.holds.held {
			continue
		}
		n, err := s.holds(ctx, name, k.kind, k.holds.live)
		if err != nil {
			return fmt.Errorf("delete workspace %s: %w", name, err)
		}
		if n {
			info, _ := schemas.Info(k.kind)
			held = append(held, info.Plural)
		}
	}
	if len(held) > 0 {
		return &Error{Kind: ErrConflict, Message: fmt.Sprintf("workspace %s still holds %s: delete them first",
			name, strings.Join(held, ", "))}
	}
	toks, err := s.store.ListTokens(ctx, name)
	if err != nil {
		return fmt.Errorf("delete workspace %s: %w", name, err)
	}
	for _, t := range toks {
		if err := s.store.RevokeToken(ctx, t.Name); err != nil && !errors.Is(err, auth.ErrNotFound) {
			return fmt.Errorf("delete workspace %s: revoke token %s: %w", name, t.Name, err)
		}
	}
	if err := s.store.DeleteWorkspace(ctx, name); err != nil {
		return storeError("delete workspace", err)
	}
	return nil
}

// holds reports whether the workspace holds an object of kind. Visibility may still
// list an execution deleted a moment ago, so each one listed is checked to exist.
// deletedJob reports whether a listed job execution no longer counts: a run that
// continued as new (its chain's last run counts), or a job deleted with its history
// kept (Jobs.Delete without Purge).
func (s *Workspaces) deletedJob(ctx context.Context, ws string, e *workflowpb.WorkflowExecutionInfo) (bool, error) {
	if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		return true, nil
	}
	if s.jobs == nil || s.jobs.history == nil {
		return false, nil
	}
	return s.jobs.history.isDeleted(ctx, ws, e.GetExecution().GetRunId())
}

func (s *Workspaces) holds(ctx context.Context, ws string, kind schemas.Kind, extra string) (bool, error) {
	t := s.temporal
	query := fmt.Sprintf("%s = %q AND %s = %q", workflows.SearchAttrKind, string(kind), workflows.SearchAttrWorkspace, ws)
	if extra != "" {
		query += " AND " + extra
	}
	var token []byte
	for {
		resp, err := t.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: t.namespace, PageSize: 100, NextPageToken: token, Query: query,
		})
		if err != nil {
			return false, fmt.Errorf("list %ss: %w", strings.ToLower(string(kind)), err)
		}
		for _, e := range resp.Executions {
			if kind == schemas.KindTrainingJob {
				gone, err := s.deletedJob(ctx, ws, e)
				if err != nil {
					return false, err
				}
				if gone {
					continue
				}
			}
			_, err := t.tc.DescribeWorkflowExecution(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId())
			if err == nil {
				return true, nil
			}
			if !isNotFound(err) {
				return false, err
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return false, nil
		}
	}
}

// storeError is a token store's error as a service error: an invalid request
// ErrInvalidObject with the fields at fault, a taken name ErrAlreadyExists, a missing
// token or workspace ErrNotFound; anything else is an internal failure of what.
func storeError(what string, err error) error {
	var list schemas.ErrorList
	switch {
	case errors.As(err, &list):
		fields := make([]schemas.FieldError, len(list))
		for i, fe := range list {
			fields[i] = *fe
		}
		return &Error{Kind: ErrInvalidObject, Message: fmt.Sprintf("%s: %d problem(s)", what, len(list)), Fields: fields}
	case errors.Is(err, auth.ErrExists):
		return &Error{Kind: ErrAlreadyExists,
			Message: strings.TrimPrefix(err.Error(), auth.ErrExists.Error()+": ") + " already exists"}
	case errors.Is(err, auth.ErrNotFound):
		return &Error{Kind: ErrNotFound,
			Message: strings.TrimPrefix(err.Error(), auth.ErrNotFound.Error()+": ") + " not found"}
	}
	return fmt.Errorf("%s: %w", what, err)
}
