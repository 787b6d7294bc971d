package jetstream

import (
	"fmt"
	"regexp"
)

// workspaceRE is a workspace name: a DNS label, so never a NATS wildcard or a token
// separator.
var workspaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidWorkspace reports whether ws is a workspace name (a DNS label of at most 63
// characters), the only names WorkspacePermissions may be given: '*', '>' or a dot
// would widen the grant to other workspaces.
func ValidWorkspace(ws string) error {
	if len(ws) > 63 || !workspaceRE.MatchString(ws) {
		return fmt.Errorf("invalid workspace name %q: want a DNS label (lowercase letters, digits and '-', at most 63 characters)", ws)
	}
	return nil
}

// Permissions are the subjects a NATS user may publish to and subscribe to, in the
// shape of nats-server's authorization blocks (publish.allow / subscribe.allow and
// subscribe.deny: a subscription on a wildcard that covers a denied subject is
// allowed, and the server does not deliver it the denied subject's messages).
type Permissions struct {
	PublishAllow   []string `json:"publishAllow"`
	SubscribeAllow []string `json:"subscribeAllow"`
	SubscribeDeny  []string `json:"subscribeDeny,omitempty"`
}

// InboxPrefix is the reply-subject prefix a workspace's users must set
// (nats.CustomInboxPrefix): a user allowed to subscribe to every _INBOX subject could
// read the replies and consumer deliveries of every other user.
func InboxPrefix(workspace string) string { return "_INBOX_" + workspace }

// WorkspacePermissions lets a user read one workspace's events and logs and nothing
// else: live subscriptions on dlc.<workspace>.> but its audit subject
// (dlc.<workspace>.audit: the audit records name every caller and address, an
// administrator's business, kept in DLC_AUDIT, which readers cannot address either), and
// JetStream consumers on the event and log streams whose filter lies inside the
// workspace, requested under ReaderAPIPrefix(workspace) through the Gate, never on
// $JS.API itself. The server checks the filter in the consumer-create subject, so a
// consumer on another workspace's subjects is refused; the Gate refuses durable
// consumers, names of the stack's, deliveries outside the reader's inbox and more than
// MaxReaderConsumers per workspace. Consumers are ephemeral with random names, and end
// by themselves when unused (nats.go's ordered consumers after 5 minutes, at most
// MaxReaderInactive): deleting one is not granted, so a reader can never destroy another's consumer.
// Reading or pulling from one needs its name, which only its creator learns: listing
// consumers (CONSUMER.LIST, NAMES) is not granted, nor any stream request (INFO, whose
// subjects_filter would list other workspaces' subjects; LIST, NAMES, PURGE, DELETE;
// MSG.GET; DIRECT.GET), nor the key-value and object stores. The internal durable
// consumers on these streams (the notification dispatcher's) have unguessable names
// too, and the dispatcher reads only the consumers it recorded itself. With mayTrigger
// (a role that may start jobs: auth.VerbWrite), the user may also publish the
// workspace's inbound trigger events, dlc.<workspace>.trigger.<name> (one token: not
// the outbound .fired events), which start jobs; a read-only user may not. workspace
// must pass ValidWorkspace.
func WorkspacePermissions(workspace string, mayTrigger bool) Permissions {
	p := Permissions{
		SubscribeAllow: []string{
			fmt.Sprintf("dlc.%s.>", workspace),
			InboxPrefix(workspace) + ".>",
		},
		SubscribeDeny: []string{fmt.Sprintf("dlc.%s.audit", workspace)},
	}
	// Through the Gate only, which checks each consumer's body (see ReaderAPIPrefix).
	api := ReaderAPIPrefix(workspace)
	for _, stream := range []string{EventsStream, LogsStream} {
		p.PublishAllow = append(p.PublishAllow,
			fmt.Sprintf("%s.CONSUMER.CREATE.%s.*.dlc.%s.>", api, stream, workspace),
			api+".CONSUMER.INFO."+stream+".*",
			api+".CONSUMER.MSG.NEXT."+stream+".*",
		)
	}
	if mayTrigger {
		p.PublishAllow = append(p.PublishAllow, fmt.Sprintf("dlc.%s.trigger.*", workspace))
	}
	return p
}
