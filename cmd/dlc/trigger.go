package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

func newTriggerCmd(g *globals) *cobra.Command {
	k := &kindCommands[schemas.Trigger, schemas.Trigger]{
		noun:    "trigger",
		aliases: []string{"triggers"},
		short:   "Manage triggers: inbound events that start pipelines or jobs (docs/triggers.md)",

		apply:      (*client.Client).ApplyTrigger,
		applyShort: "Create or replace a trigger",
		applied: func(t *schemas.Trigger) string {
			return fmt.Sprintf("trigger %s/%s applied: listening on %s", t.Metadata.Workspace, t.Metadata.Name, triggerSource(t))
		},

		get:      (*client.Client).GetTrigger,
		getShort: "Print a trigger",

		list:      whole((*client.Client).ListTriggers, func(l *api.TriggerList) []schemas.Trigger { return l.Items }),
		listShort: "List the workspace's triggers",
		columns: []column[schemas.Trigger]{
			{"NAME", func(t schemas.Trigger) string { return t.Metadata.Name }},
			{"SUBJECT", func(t schemas.Trigger) string { return triggerSource(&t) }},
			{"FILTERS", func(t schemas.Trigger) string { return strconv.Itoa(len(t.Spec.Filter)) }},
			{"ACTION", func(t schemas.Trigger) string {
				if p := t.Spec.Action.Pipeline; p != nil {
					return fmt.Sprintf("pipeline (%d steps)", len(p.Steps))
				}
				return "job"
			}},
		},

		del:      (*client.Client).DeleteTrigger,
		delShort: "Delete a trigger (what it started keeps running)",
	}
	return k.command(g)
}

// triggerSource says where a trigger listens: its subject, its webhook's route and
// subject, or OpenDLC's own events.
func triggerSource(t *schemas.Trigger) string {
	switch {
	case t.Spec.Events != nil:
		return "OpenDLC's own events"
	case t.Spec.Webhook != nil:
		return fmt.Sprintf("webhook /v1/workspaces/%s/triggers/%s/webhook (%s)", t.Metadata.Workspace, t.Metadata.Name, t.ListenSubject())
	}
	return t.Spec.Subject
}
