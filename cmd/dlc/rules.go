package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newRulesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "rules",
		Aliases: []string{"notificationrules", "rule"},
		Short:   "Manage notification rules: events delivered to webhooks or NATS subjects",
	}
	var file string
	apply := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or replace a rule",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.ApplyRule(cmd.Context(), data)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rule %s/%s applied\n", r.Metadata.Workspace, r.Metadata.Name)
			return nil
		},
	}
	apply.Flags().StringVarP(&file, "file", "f", "", "rule file (YAML or JSON); - for stdin")
	_ = apply.MarkFlagRequired("file")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's rules",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			l, err := c.ListRules(cmd.Context(), g.workspace)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTYPES\tPHASES\tTARGET")
			for _, r := range l.Items {
				target := r.Spec.Subject
				if r.Spec.Webhook != nil {
					target = r.Spec.Webhook.URL
				}
				phases := make([]string, len(r.Spec.Match.Phases))
				for i, p := range r.Spec.Match.Phases {
					phases[i] = string(p)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Metadata.Name, strings.Join(r.Spec.Match.Types, ","),
					strings.Join(phases, ","), target)
			}
			return tw.Flush()
		},
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Print a rule (secrets redacted)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.GetRule(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			format := g.output
			if format == "table" {
				format = "yaml"
			}
			return printObject(cmd.OutOrStdout(), format, r)
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a rule",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteRule(cmd.Context(), g.workspace, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rule %s deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(apply, list, get, del)
	return cmd
}
