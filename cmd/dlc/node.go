package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
)

// Nodes are not documents (nothing applies or deletes them): `dlc node list|get|release`
// read their health verdicts and release one from quarantine (a cluster administrator).
func newNodeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "node",
		Aliases: []string{"nodes"},
		Short:   "Nodes' health verdicts and quarantine (a token of every workspace; release: a cluster admin)",
	}
	var reason string
	release := &cobra.Command{
		Use:   "release NAME",
		Short: "Release a node from quarantine now, whatever its re-check backoff says",
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			n, err := c.ReleaseNode(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			return g.print(cmd, n, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "node %s released from quarantine\n", n.Name)
				return err
			})
		}),
	}
	release.Flags().StringVar(&reason, "reason", "", "why, recorded in the release's node-health event")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "Every node's latest health verdict and whether it is quarantined",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			l, err := c.ListNodes(cmd.Context())
			if err != nil {
				return err
			}
			return g.print(cmd, l, func(w io.Writer) error { return printNodes(w, l.Items) })
		}),
	}, &cobra.Command{
		Use:   "get NAME",
		Short: "A node's latest health verdict, its checks, and whether it is quarantined",
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			n, err := c.GetNode(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.print(cmd, n, func(w io.Writer) error { return printNodes(w, []api.Node{*n}) })
		}),
	}, release)
	return cmd
}

func printNodes(w io.Writer, nodes []api.Node) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tQUARANTINED\tCHECKED\tJOB\tCHECKS")
	for _, n := range nodes {
		checks := make([]string, 0, len(n.Checks))
		for _, c := range n.Checks {
			verdict := "ok"
			if !c.OK {
				verdict = "failed"
			}
			checks = append(checks, c.Name+" "+verdict)
		}
		job := n.Job
		if job == "" {
			job = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\n", n.Name, n.Status, n.Quarantined, n.CheckedAt.Local().Format(time.DateTime), job, strings.Join(checks, ", "))
	}
	return tw.Flush()
}
