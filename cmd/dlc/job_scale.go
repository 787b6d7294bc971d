package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/client"
)

// newScaleCmd is `dlc job scale NAME --replicas N`: a running elastic job's replica
// count, within its spec.elastic bounds.
func newScaleCmd(g *globals) *cobra.Command {
	var replicas int32
	cmd := g.nameCmd("scale NAME", "Set a running elastic job's replica count (within spec.elastic); the other replicas keep running",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			r, err := c.ScaleJob(cmd.Context(), g.workspace, name, replicas)
			if err != nil {
				return nil, nil, err
			}
			return r, line("job %s: %d replicas (desired %d), %s", name, r.CurrentReplicas, r.DesiredReplicas, r.Phase), nil
		})
	cmd.Flags().Int32Var(&replicas, "replicas", 0, "the job's replica count, all roles together, within spec.elastic's minReplicas and maxReplicas")
	_ = cmd.MarkFlagRequired("replicas")
	return cmd
}
