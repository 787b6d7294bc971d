package jetstream

import "fmt"

// Permissions are the subjects a NATS user may publish to and subscribe to, in the
// shape of nats-server's authorization blocks (publish.allow / subscribe.allow).
type Permissions struct {
	PublishAllow   []string `json:"publishAllow"`
	SubscribeAllow []string `json:"subscribeAllow"`
}

// InboxPrefix is the reply-subject prefix a workspace's users must set
// (nats.CustomInboxPrefix): a user allowed to subscribe to every _INBOX subject could
// read the replies and consumer deliveries of every other user.
func InboxPrefix(workspace string) string { return "_INBOX_" + workspace }

// WorkspacePermissions lets a user read one workspace's events and logs and nothing
// else: live subscriptions on dlc.<workspace>.>, and JetStream consumers on the event and
// log streams whose filter lies inside the workspace. The server checks the filter in
// the consumer-create subject, so a consumer on another workspace's subjects is refused.
// Consumers are ephemeral with random names; pulling from one needs its name, which only
// its creator learns. The user may also publish the workspace's inbound trigger events,
// dlc.<workspace>.trigger.<name> (one token: not the outbound .fired events).
func WorkspacePermissions(workspace string) Permissions {
	p := Permissions{
		SubscribeAllow: []string{
			fmt.Sprintf("dlc.%s.>", workspace),
			InboxPrefix(workspace) + ".>",
		},
	}
	for _, stream := range []string{EventsStream, LogsStream} {
		p.PublishAllow = append(p.PublishAllow,
			"$JS.API.STREAM.INFO."+stream,
			fmt.Sprintf("$JS.API.CONSUMER.CREATE.%s.*.dlc.%s.>", stream, workspace),
			"$JS.API.CONSUMER.INFO."+stream+".*",
			"$JS.API.CONSUMER.DELETE."+stream+".*",
			"$JS.API.CONSUMER.MSG.NEXT."+stream+".*",
		)
	}
	p.PublishAllow = append(p.PublishAllow, fmt.Sprintf("dlc.%s.trigger.*", workspace))
	return p
}
