package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events/jetstream"
)

// WorkspaceReaderAuthenticator admits a workspace's event readers to NATS: the user
// name is the workspace, the password an OpenDLC API token that may read it (any role
// of that workspace, or an admin token). The connection gets
// jetstream.WorkspacePermissions of that workspace (trigger publishes only for a role
// that may write) and ends when the token expires. A
// revoked token connects no more; a connection already open keeps running until it
// closes or the token's expiry.
func WorkspaceReaderAuthenticator(store *auth.Store) devstack.NATSAuthenticator {
	return func(ctx context.Context, workspace, token string) (devstack.NATSGrant, error) {
		if err := jetstream.ValidWorkspace(workspace); err != nil {
			return devstack.NATSGrant{}, err
		}
		id, err := store.Authenticate(ctx, token)
		if err != nil {
			return devstack.NATSGrant{}, err
		}
		if !auth.InWorkspace(id, workspace) || !auth.Allows(id.Role, auth.VerbRead) {
			return devstack.NATSGrant{}, fmt.Errorf("token %q may not read workspace %s", id.Name, workspace)
		}
		// Publishing trigger events starts jobs: only for a role that may.
		p := jetstream.WorkspacePermissions(workspace, auth.Allows(id.Role, auth.VerbWrite))
		g := devstack.NATSGrant{Publish: p.PublishAllow, Subscribe: p.SubscribeAllow, SubscribeDeny: p.SubscribeDeny}
		if id.ExpiresAt != nil {
			g.Deadline = *id.ExpiresAt
		}
		if !g.Deadline.IsZero() && !g.Deadline.After(time.Now()) {
			return devstack.NATSGrant{}, auth.ErrExpiredToken
		}
		return g, nil
	}
}
