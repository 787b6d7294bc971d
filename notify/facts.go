package notify

import "github.com/opendlc/opendlc/schemas"

// EventFacts reads an event of DLC_EVENTS as a rule's match sees it: its workspace
// (the subject's, which NATS permissions protect; an envelope that claims another
// workspace is refused), its id and the facts NotificationMatch.Matches looks at. The
// trigger dispatcher matches its triggers on OpenDLC's own events with it, so that a
// trigger's events.match and a rule's match select the same events.
func EventFacts(subject string, data []byte) (workspace, id string, facts schemas.EventFacts, err error) {
	ev, err := parseEvent(subject, data)
	if err != nil {
		return "", "", schemas.EventFacts{}, err
	}
	return ev.workspace, ev.id, ev.facts, nil
}
