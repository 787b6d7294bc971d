package main

import (
	"io"
	"strconv"
	"strings"
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
	release := g.nameCmd("release NAME", "Release a node from quarantine now, whatever its re-check backoff says",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			n, err := c.ReleaseNode(cmd.Context(), name, reason)
			if err != nil {
				return nil, nil, err
			}
			return n, line("node %s released from quarantine", n.Name), nil
		})
	release.Flags().StringVar(&reason, "reason", "", "why, recorded in the release's node-health event")
	cmd.AddCommand(g.viewCmd("list", "Every node's latest health verdict and whether it is quarantined",
		func(cmd *cobra.Command, c *client.Client) (any, func(io.Writer) error, error) {
			l, err := c.ListNodes(cmd.Context())
			if err != nil {
				return nil, nil, err
			}
			return l, func(w io.Writer) error { return printTable(w, nodeColumns, l.Items) }, nil
		}),
		g.nameCmd("get NAME", "A node's latest health verdict, its checks, and whether it is quarantined",
			func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
				n, err := c.GetNode(cmd.Context(), name)
				if err != nil {
					return nil, nil, err
				}
				return n, func(w io.Writer) error { return printTable(w, nodeColumns, []api.Node{*n}) }, nil
			}),
		release)
	return cmd
}

// nodeColumns are the table output of `dlc node list|get`.
var nodeColumns = []column[api.Node]{
	{"NAME", func(n api.Node) string { return n.Name }},
	{"STATUS", func(n api.Node) string { return n.Status }},
	{"QUARANTINED", func(n api.Node) string { return strconv.FormatBool(n.Quarantined) }},
	{"CHECKED", func(n api.Node) string { return n.CheckedAt.Local().Format(time.DateTime) }},
	{"JOB", func(n api.Node) string { return dash(n.Job) }},
	{"CHECKS", func(n api.Node) string {
		checks := make([]string, 0, len(n.Checks))
		for _, c := range n.Checks {
			verdict := "ok"
			if !c.OK {
				verdict = "failed"
			}
			checks = append(checks, c.Name+" "+verdict)
		}
		return strings.Join(checks, ", ")
	}},
}
