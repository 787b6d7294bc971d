package auth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/api"
	dlcjs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/schemas"
)

// Bucket is the key-value bucket of tokens and workspaces. Keys:
//
//	token.<id>          a token's record (hash, name, workspace, role, expiry)
//	tokenname.<name>    the id of the token of that name (names are unique)
//	workspace.<name>    a workspace
const Bucket = dlcjs.AuthBucket

// Bounds of tokens and workspaces.
const (
	// DefaultTTL is how long a token works when the request names no expiry.
	DefaultTTL = 30 * 24 * time.Hour
	// MaxTTL bounds every token but the bootstrap admin's.
	MaxTTL = 366 * 24 * time.Hour
	// MinTTL is the shortest lifetime a token may be given.
	MinTTL = time.Second
	// BootstrapName is the name of the admin token Bootstrap installs.
	BootstrapName = "admin"
	// ReservedWorkspace is published under by the system itself (node health); it
	// cannot be created.
	ReservedWorkspace = "system"
	maxNameLen        = 63
	maxWorkspaceLen   = 40
	maxDescriptionLen = 256
)

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Store keeps tokens and workspaces in the DLC_AUTH bucket. It also keeps every token
// record in memory, kept current by a watch of the bucket, so that authenticating a
// request costs no round trip and keeps working while NATS is unreachable. A token the
// index does not know yet (created on another server a moment ago) is read from the
// bucket. Token ids are random and never reused, so a revoked id is remembered as dead
// for good: a revocation takes effect at once on the server that made it and within
// the watch's latency (milliseconds) on the others.
type Store struct {
	kv  jetstream.KeyValue
	now func() time.Time
	// singleTenant, when set, is why only the default workspace may have tokens
	// (WithSingleTenant).
	singleTenant string

	mu     sync.RWMutex
	tokens map[string]indexed // by id
	dead   map[string]bool    // revoked ids
	stop   context.CancelFunc
	done   chan struct{}
}

// indexed is a token record and the bucket revision it was read at.
type indexed struct {
	rec record
	rev uint64
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock expiry is checked against. Default time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithSingleTenant makes CreateToken refuse every token but admins' and those of the
// default workspace, saying why: the stack runs its jobs where they can read its
// secrets (the local backend without its sandbox), so a member of any workspace could
// make itself admin. Default: tokens of every workspace.
func WithSingleTenant(why string) Option { return func(s *Store) { s.singleTenant = why } }

// OpenStore opens the bucket, which events/jetstream.EnsureStreams creates.
func OpenStore(ctx context.Context, js jetstream.JetStream, opts ...Option) (*Store, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("auth: open bucket %s (created by jetstream.EnsureStreams): %w", Bucket, err)
	}
	s := &Store{kv: kv, now: time.Now, tokens: map[string]indexed{}, dead: map[string]bool{}, done: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	wctx, stop := context.WithCancel(context.Background())
	w, err := kv.Watch(wctx, "token.*")
	if err != nil {
		stop()
		return nil, fmt.Errorf("auth: watch tokens: %w", err)
	}
	s.stop = stop
	go s.follow(wctx, w)
	return s, nil
}

// Close stops following the bucket.
func (s *Store) Close() {
	s.stop()
	<-s.done
}

// follow applies the bucket's token changes to the index until ctx ends.
func (s *Store) follow(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(s.done)
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // the initial values are in
			}
			id := strings.TrimPrefix(e.Key(), "token.")
			if e.Operation() != jetstream.KeyValuePut {
				s.forget(id)
				continue
			}
			var rec record
			if json.Unmarshal(e.Value(), &rec) == nil && rec.ID == id {
				s.remember(rec, e.Revision())
			}
		}
	}
}

func (s *Store) remember(rec record, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead[rec.ID] || s.tokens[rec.ID].rev > rev {
		return
	}
	s.tokens[rec.ID] = indexed{rec: rec, rev: rev}
}

func (s *Store) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, id)
	s.dead[id] = true
}

// lookup finds a token record: in the index, else in the bucket.
func (s *Store) lookup(ctx context.Context, id string) (record, error) {
	s.mu.RLock()
	t, ok := s.tokens[id]
	dead := s.dead[id]
	s.mu.RUnlock()
	switch {
	case dead:
		return record{}, ErrUnknownToken
	case ok:
		return t.rec, nil
	}
	e, err := s.kv.Get(ctx, tokenKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return record{}, ErrUnknownToken
	}
	if err != nil {
		return record{}, fmt.Errorf("auth: look up token: %w", err)
	}
	var rec record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return record{}, fmt.Errorf("auth: stored token %s: %w", id, err)
	}
	return rec, nil
}

// record is a stored token: everything but the secret, which is kept only as a hash.
type record struct {
	ID   string `json:"id"`
	Hash string `json:"hash"`
	api.Token
}

func (r record) identity() api.Identity {
	return api.Identity{Name: r.Name, Workspace: r.Workspace, Role: r.Role, ExpiresAt: r.ExpiresAt}
}

func tokenKey(id string) string       { return "token." + id }
func tokenNameKey(name string) string { return "tokenname." + name }
func workspaceKey(name string) string { return "workspace." + name }

// Authenticate returns the identity of a token. Errors: ErrMalformedToken,
// ErrUnknownToken (never created, revoked, or a wrong secret), ErrExpiredToken, or a
// failure to reach the bucket.
func (s *Store) Authenticate(ctx context.Context, token string) (api.Identity, error) {
	id, err := ParseToken(token)
	if err != nil {
		return api.Identity{}, err
	}
	rec, err := s.lookup(ctx, id)
	if err != nil {
		return api.Identity{}, err
	}
	if subtle.ConstantTimeCompare([]byte(HashToken(token)), []byte(rec.Hash)) != 1 {
		return api.Identity{}, ErrUnknownToken
	}
	if rec.ExpiresAt != nil && !s.now().Before(*rec.ExpiresAt) {
		return api.Identity{}, ErrExpiredToken
	}
	return rec.identity(), nil
}

// ValidateTokenRequest returns every problem with a token request, each with its field
// path. It does not check that the workspace exists.
func ValidateTokenRequest(req api.TokenRequest, now time.Time) schemas.ErrorList {
	var errs schemas.ErrorList
	if req.Name == "" {
		errs = append(errs, schemas.Required(schemas.NewPath("name")))
	} else if len(req.Name) > maxNameLen || !dnsLabelRE.MatchString(req.Name) {
		errs = append(errs, schemas.Invalid(schemas.NewPath("name"), "must be a DNS label of at most %d characters", maxNameLen))
	}
	wsPath := schemas.NewPath("workspace")
	switch {
	case !ValidRole(req.Role):
		errs = append(errs, schemas.NotSupported(schemas.NewPath("role"), api.Roles))
	case req.Role == api.RoleAdmin && req.Workspace != api.AllWorkspaces:
		errs = append(errs, schemas.Invalid(wsPath, "must be %q for role admin: admins act in every workspace", api.AllWorkspaces))
	case req.Role != api.RoleAdmin && req.Workspace == api.AllWorkspaces:
		errs = append(errs, schemas.Invalid(wsPath, "%q is only for role admin; name one workspace", api.AllWorkspaces))
	}
	if req.Workspace == "" {
		errs = append(errs, schemas.Required(wsPath))
	} else if req.Workspace != api.AllWorkspaces && (len(req.Workspace) > maxWorkspaceLen || !dnsLabelRE.MatchString(req.Workspace)) {
		errs = append(errs, schemas.Invalid(wsPath, "must be a DNS label of at most %d characters, or %q", maxWorkspaceLen, api.AllWorkspaces))
	}
	if req.ExpiresAt != nil {
		if d := req.ExpiresAt.Sub(now); d < MinTTL || d > MaxTTL {
			errs = append(errs, schemas.Invalid(schemas.NewPath("expiresAt"), "must be between %s and %d days from now", MinTTL, MaxTTL/(24*time.Hour)))
		}
	} else if req.TTL != 0 && (req.TTL.D() < MinTTL || req.TTL.D() > MaxTTL) {
		errs = append(errs, schemas.Invalid(schemas.NewPath("ttl"), "must be between %s and %s", MinTTL, MaxTTL))
	}
	errs.Sort()
	return errs
}

// CreateToken creates a token and returns it with its secret, which is not stored and
// cannot be shown again. An invalid request is refused with a schemas.ErrorList (a
// workspace that does not exist is one of its problems); a name in use with ErrExists.
func (s *Store) CreateToken(ctx context.Context, req api.TokenRequest, createdBy string) (api.CreatedToken, error) {
	now := s.now().UTC().Truncate(time.Second)
	errs := ValidateTokenRequest(req, now)
	if req.Workspace != api.AllWorkspaces && dnsLabelRE.MatchString(req.Workspace) && len(req.Workspace) <= maxWorkspaceLen {
		if _, err := s.GetWorkspace(ctx, req.Workspace); errors.Is(err, ErrNotFound) {
			errs = append(errs, schemas.Invalid(schemas.NewPath("workspace"), "workspace %q does not exist: create it first", req.Workspace))
		} else if err != nil {
			return api.CreatedToken{}, err
		}
	}
	if s.singleTenant != "" && req.Role != api.RoleAdmin && req.Workspace != schemas.DefaultWorkspace {
		errs = append(errs, schemas.Invalid(schemas.NewPath("workspace"),
			"this stack is single-tenant: %s, so only workspace %q may have tokens besides admins (dlc up --trust-local-jobs lets other workspaces in; see docs/security.md#local-jobs)",
			s.singleTenant, schemas.DefaultWorkspace))
	}
	if len(errs) > 0 {
		errs.Sort()
		return api.CreatedToken{}, errs
	}
	expires := now.Add(DefaultTTL)
	switch {
	case req.ExpiresAt != nil:
		expires = req.ExpiresAt.UTC()
	case req.TTL != 0:
		expires = now.Add(req.TTL.D())
	}
	secret, id, err := NewToken()
	if err != nil {
		return api.CreatedToken{}, err
	}
	tok := api.Token{Name: req.Name, Workspace: req.Workspace, Role: req.Role, ExpiresAt: &expires,
		CreatedAt: now, CreatedBy: createdBy}
	if _, err := s.kv.Create(ctx, tokenNameKey(req.Name), []byte(id)); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return api.CreatedToken{}, fmt.Errorf("%w: token %s", ErrExists, req.Name)
		}
		return api.CreatedToken{}, fmt.Errorf("auth: create token %s: %w", req.Name, err)
	}
	if err := s.putRecord(ctx, record{ID: id, Hash: HashToken(secret), Token: tok}); err != nil {
		_ = s.kv.Delete(ctx, tokenNameKey(req.Name))
		return api.CreatedToken{}, err
	}
	return api.CreatedToken{Token: tok, Secret: secret}, nil
}

func (s *Store) putRecord(ctx context.Context, rec record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("auth: encode token: %w", err)
	}
	rev, err := s.kv.Put(ctx, tokenKey(rec.ID), data)
	if err != nil {
		return fmt.Errorf("auth: store token %s: %w", rec.Name, err)
	}
	s.remember(rec, rev)
	return nil
}

// ListTokens returns every token, sorted by name; with workspace set, only that
// workspace's.
func (s *Store) ListTokens(ctx context.Context, workspace string) ([]api.Token, error) {
	var out []api.Token
	err := s.each(ctx, "token.*", func(data []byte) error {
		var rec record
		if err := json.Unmarshal(data, &rec); err != nil {
			return err
		}
		if workspace == "" || rec.Workspace == workspace {
			out = append(out, rec.Token)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("auth: list tokens: %w", err)
	}
	slices.SortFunc(out, func(a, b api.Token) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// GetToken returns the token of that name, without its secret; ErrNotFound when
// there is none.
func (s *Store) GetToken(ctx context.Context, name string) (api.Token, error) {
	e, err := s.kv.Get(ctx, tokenNameKey(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return api.Token{}, fmt.Errorf("%w: token %s", ErrNotFound, name)
	}
	if err != nil {
		return api.Token{}, fmt.Errorf("auth: get token %s: %w", name, err)
	}
	e, err = s.kv.Get(ctx, tokenKey(string(e.Value())))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return api.Token{}, fmt.Errorf("%w: token %s", ErrNotFound, name)
	}
	if err != nil {
		return api.Token{}, fmt.Errorf("auth: get token %s: %w", name, err)
	}
	var rec record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return api.Token{}, fmt.Errorf("auth: decode token %s: %w", name, err)
	}
	return rec.Token, nil
}

// Now is the store's clock (the one expiries are checked against).
func (s *Store) Now() time.Time { return s.now() }

// RevokeToken deletes the token of that name; it stops working at once. ErrNotFound
// when there is none.
func (s *Store) RevokeToken(ctx context.Context, name string) error {
	e, err := s.kv.Get(ctx, tokenNameKey(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: token %s", ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("auth: revoke token %s: %w", name, err)
	}
	id := string(e.Value())
	if err := s.kv.Delete(ctx, tokenKey(id)); err != nil {
		return fmt.Errorf("auth: revoke token %s: %w", name, err)
	}
	s.forget(id)
	if err := s.kv.Delete(ctx, tokenNameKey(name)); err != nil {
		return fmt.Errorf("auth: revoke token %s: %w", name, err)
	}
	return nil
}

// Bootstrap installs token as the admin token named BootstrapName (workspace "*", no
// expiry), replacing an earlier bootstrap token, and makes sure the workspace
// schemas.DefaultWorkspace exists. It is what `dlc up` and `dlc server` do at start.
func (s *Store) Bootstrap(ctx context.Context, token string) error {
	id, err := ParseToken(token)
	if err != nil {
		return err
	}
	if e, err := s.kv.Get(ctx, tokenNameKey(BootstrapName)); err == nil && string(e.Value()) != id {
		if err := s.kv.Delete(ctx, tokenKey(string(e.Value()))); err != nil {
			return fmt.Errorf("auth: replace bootstrap token: %w", err)
		}
		s.forget(string(e.Value()))
	} else if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("auth: bootstrap: %w", err)
	}
	rec := record{ID: id, Hash: HashToken(token), Token: api.Token{Name: BootstrapName, Workspace: api.AllWorkspaces,
		Role: api.RoleAdmin, CreatedAt: s.now().UTC().Truncate(time.Second), CreatedBy: "bootstrap"}}
	if err := s.putRecord(ctx, rec); err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, tokenNameKey(BootstrapName), []byte(id)); err != nil {
		return fmt.Errorf("auth: bootstrap: %w", err)
	}
	_, err = s.CreateWorkspace(ctx, api.Workspace{Name: schemas.DefaultWorkspace, Description: "the default workspace"}, "bootstrap")
	if err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	return nil
}

// ValidateWorkspace returns every problem with a workspace, each with its field path.
func ValidateWorkspace(ws api.Workspace) schemas.ErrorList {
	var errs schemas.ErrorList
	switch {
	case ws.Name == "":
		errs = append(errs, schemas.Required(schemas.NewPath("name")))
	case len(ws.Name) > maxWorkspaceLen || !dnsLabelRE.MatchString(ws.Name):
		errs = append(errs, schemas.Invalid(schemas.NewPath("name"), "must be a DNS label of at most %d characters", maxWorkspaceLen))
	case ws.Name == ReservedWorkspace:
		errs = append(errs, schemas.Invalid(schemas.NewPath("name"), "%q is reserved", ReservedWorkspace))
	}
	if ws.Namespace != "" && (len(ws.Namespace) > maxNameLen || !dnsLabelRE.MatchString(ws.Namespace)) {
		errs = append(errs, schemas.Invalid(schemas.NewPath("namespace"), "must be a DNS label of at most %d characters", maxNameLen))
	}
	errs = append(errs, schemas.ValidatePodDefaults(ws.PodDefaults, schemas.NewPath("podDefaults"))...)
	errs = append(errs, validateStorage(ws.Storage)...)
	if len(ws.Description) > maxDescriptionLen {
		errs = append(errs, schemas.Invalid(schemas.NewPath("description"), "must be at most %d characters", maxDescriptionLen))
	}
	errs.Sort()
	return errs
}

// CreateWorkspace registers a workspace; its namespace defaults to its name. An invalid
// workspace is refused with a schemas.ErrorList, an existing name with ErrExists.
func (s *Store) CreateWorkspace(ctx context.Context, ws api.Workspace, createdBy string) (api.Workspace, error) {
	if errs := ValidateWorkspace(ws); len(errs) > 0 {
		return api.Workspace{}, errs
	}
	if ws.Namespace == "" {
		ws.Namespace = ws.Name
	}
	ws.CreatedAt = s.now().UTC().Truncate(time.Second)
	ws.CreatedBy = createdBy
	data, err := json.Marshal(ws)
	if err != nil {
		return api.Workspace{}, fmt.Errorf("auth: encode workspace: %w", err)
	}
	if _, err := s.kv.Create(ctx, workspaceKey(ws.Name), data); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return api.Workspace{}, fmt.Errorf("%w: workspace %s", ErrExists, ws.Name)
		}
		return api.Workspace{}, fmt.Errorf("auth: create workspace %s: %w", ws.Name, err)
	}
	return ws, nil
}

// GetWorkspace returns a workspace, or an error wrapping ErrNotFound.
func (s *Store) GetWorkspace(ctx context.Context, name string) (api.Workspace, error) {
	return readWorkspace(ctx, s.kv, name)
}

// DeleteWorkspace removes a workspace from the registry, or returns an error wrapping
// ErrNotFound. Its tokens are not revoked here: the caller (service.Workspaces)
// revokes them first.
func (s *Store) DeleteWorkspace(ctx context.Context, name string) error {
	if _, err := s.GetWorkspace(ctx, name); err != nil {
		return err
	}
	if err := s.kv.Delete(ctx, workspaceKey(name)); err != nil {
		return fmt.Errorf("auth: delete workspace %s: %w", name, err)
	}
	return nil
}

// ListWorkspaces returns every workspace, sorted by name.
func (s *Store) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	var out []api.Workspace
	err := s.each(ctx, "workspace.*", func(data []byte) error {
		var ws api.Workspace
		if err := json.Unmarshal(data, &ws); err != nil {
			return err
		}
		out = append(out, ws)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("auth: list workspaces: %w", err)
	}
	slices.SortFunc(out, func(a, b api.Workspace) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// each calls fn with the value of every live key matching filter.
func (s *Store) each(ctx context.Context, filter string, fn func([]byte) error) error {
	w, err := s.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watcher closed")
			}
			if e == nil {
				return nil
			}
			if err := fn(e.Value()); err != nil {
				return fmt.Errorf("%s: %w", e.Key(), err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
