package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
)

func newEventCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "event", Aliases: []string{"events"}, Short: "Read the event stream"}
	var opts client.EventOptions
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Print the workspace's events (status, metrics); -f keeps following",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			out := cmd.OutOrStdout()
			err := c.Events(cmd.Context(), g.workspace, opts, func(ev events.Event) error {
				return printEvent(out, g.output, ev)
			})
			if cmd.Context().Err() != nil {
				return nil //nolint:nilerr // interrupted by the user: a normal end of tail -f
			}
			return err
		}),
	}
	f := tail.Flags()
	f.StringVar(&opts.Type, "type", "", "only this event type, such as "+events.TypeJobPhase)
	f.StringVar(&opts.Job, "job", "", "only this job's events")
	f.DurationVar(&opts.Since, "since", time.Hour, "start this far back")
	f.BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new events")
	var trigger bool
	perms := &cobra.Command{
		Use:   "permissions",
		Short: "Print the NATS permissions of a workspace's users (nats-server authorization block)",
		Args:  cobra.NoArgs,
		Long: "Print the NATS permissions of a workspace's users (nats-server authorization block).\n" +
			"On `dlc up`'s NATS a reader needs no configuration: it connects with user WORKSPACE and an\n" +
			"API token of that workspace as password, and gets these permissions (--trigger for tokens\n" +
			"whose role may start jobs).",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := jetstream.ValidWorkspace(g.workspace); err != nil {
				return fmt.Errorf("--workspace: %w", err)
			}
			p := jetstream.WorkspacePermissions(g.workspace, trigger)
			return printObject(cmd.OutOrStdout(), g.format("json"), map[string]any{
				"permissions": map[string]any{
					"publish":   map[string]any{"allow": p.PublishAllow},
					"subscribe": map[string]any{"allow": p.SubscribeAllow, "deny": p.SubscribeDeny},
				},
				"inbox_prefix": jetstream.InboxPrefix(g.workspace),
				"api_prefix":   jetstream.ReaderAPIPrefix(g.workspace),
			})
		},
	}
	perms.Flags().BoolVar(&trigger, "trigger", false, "also allow publishing the workspace's trigger events, which start jobs (for users whose role may start jobs)")
	cmd.AddCommand(tail, perms)
	return cmd
}

// printEvent writes an event as a line, a JSON line, or a YAML document.
func printEvent(w io.Writer, format string, ev events.Event) error {
	switch format {
	case "yaml":
		if _, err := fmt.Fprintln(w, "---"); err != nil {
			return err
		}
		return printObject(w, format, ev)
	case "json":
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	summary := string(ev.Data)
	switch ev.Type {
	case events.TypeJobPhase:
		var d events.JobPhaseData
		if json.Unmarshal(ev.Data, &d) == nil {
			summary = fmt.Sprintf("%s -> %s  %s", d.Previous, d.Phase, d.Message)
			if d.Previous == "" {
				summary = fmt.Sprintf("%s  %s", d.Phase, d.Message)
			}
		}
	case events.TypeJobMetric:
		var d events.MetricData
		if json.Unmarshal(ev.Data, &d) == nil {
			summary = fmt.Sprintf("%s %v", d.Replica, d.Values)
		}
	}
	_, err := fmt.Fprintf(w, "%s  %-22s %-20s %s\n", ev.Time.Local().Format("15:04:05.000"), ev.Type, ev.Subject, summary)
	return err
}
