package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

func newRuleCmd(g *globals) *cobra.Command {
	k := &kindCommands[schemas.NotificationRule, schemas.NotificationRule]{
		noun:    "rule",
		aliases: []string{"rules", "notificationrules", "notificationrule"},
		short:   "Manage notification rules: events delivered to webhooks, e-mail or NATS subjects",

		apply:      (*client.Client).ApplyRule,
		applyShort: "Create or replace a rule",
		applied: func(r *schemas.NotificationRule) string {
			return fmt.Sprintf("rule %s/%s applied", r.Metadata.Workspace, r.Metadata.Name)
		},

		get:      (*client.Client).GetRule,
		getShort: "Print a rule (secrets redacted)",

		list:      whole((*client.Client).ListRules, func(l *api.RuleList) []schemas.NotificationRule { return l.Items }),
		listShort: "List the workspace's rules",
		columns: []column[schemas.NotificationRule]{
			{"NAME", func(r schemas.NotificationRule) string { return r.Metadata.Name }},
			{"TYPES", func(r schemas.NotificationRule) string { return strings.Join(r.Spec.Match.Types, ",") }},
			{"PHASES", func(r schemas.NotificationRule) string {
				phases := make([]string, len(r.Spec.Match.Phases))
				for i, p := range r.Spec.Match.Phases {
					phases[i] = string(p)
				}
				return strings.Join(phases, ",")
			}},
			{"TARGET", func(r schemas.NotificationRule) string {
				if r.Spec.Webhook != nil {
					if f := r.Spec.Webhook.Format; f != "" && f != schemas.FormatCloudEvents {
						return string(f) + " " + r.Spec.Webhook.URL
					}
					return r.Spec.Webhook.URL
				}
				if r.Spec.Email != nil {
					return "mailto:" + strings.Join(r.Spec.Email.To, ",")
				}
				return r.Spec.Subject
			}},
			{"ALERT", func(r schemas.NotificationRule) string {
				if a := r.Spec.Alert; a != nil {
					return a.Metric + " " + a.Condition()
				}
				return ""
			}},
		},

		del:      (*client.Client).DeleteRule,
		delShort: "Delete a rule",
	}
	k.more = func() []*cobra.Command { return []*cobra.Command{newRedriveCmd(g)} }
	return k.command(g)
}
