package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
)

// The quota is one per workspace, not a kind of named object: get and set take no name.
func newQuotaCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "quota",
		Aliases: []string{"quotas"},
		Short:   "Show or set the workspace's resource quota (jobs in the quota pool wait in Queued while it is full)",
	}
	cmd.AddCommand(newQuotaSetCmd(g), &cobra.Command{
		Use:   "get",
		Short: "Show the quota, what is in use, and the queue",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			st, err := c.GetQuota(cmd.Context(), g.workspace)
			if err != nil {
				return err
			}
			return g.print(cmd, st, func(w io.Writer) error { return printQuota(w, st) })
		}),
	})
	return cmd
}

func newQuotaSetCmd(g *globals) *cobra.Command {
	var (
		gpu         int64
		cpu, memory string
	)
	cmd := &cobra.Command{
		Use:   "set [--gpu N] [--cpu Q] [--memory Q]",
		Short: "Set the quota; a resource not given is unlimited",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			q := api.Quota{CPU: cpu, Memory: memory}
			if cmd.Flags().Changed("gpu") {
				q.GPU = &gpu
			}
			if err := c.SetQuota(cmd.Context(), g.workspace, q); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "quota of workspace %s set\n", g.workspace)
			return nil
		}),
	}
	cmd.Flags().Int64Var(&gpu, "gpu", 0, "GPUs")
	cmd.Flags().StringVar(&cpu, "cpu", "", `CPU cores, such as "64" or "500m"`)
	cmd.Flags().StringVar(&memory, "memory", "", `memory, such as "256Gi"`)
	return cmd
}

func printQuota(w io.Writer, st *api.QuotaStatus) error {
	limit := func(s string) string {
		if s == "" {
			return "unlimited"
		}
		return s
	}
	gpus := "unlimited"
	if st.Limits.GPU != nil {
		gpus = strconv.FormatInt(*st.Limits.GPU, 10)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tUSED\tLIMIT")
	fmt.Fprintf(tw, "gpu\t%d\t%s\n", st.Used.GPU, gpus)
	fmt.Fprintf(tw, "cpu\t%s\t%s\n", st.Used.CPU, limit(st.Limits.CPU))
	fmt.Fprintf(tw, "memory\t%s\t%s\n", st.Used.Memory, limit(st.Limits.Memory))
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "JOB\tSTATE\tPRIORITY\tGPU\tCPU\tMEMORY\tSINCE")
	for _, j := range st.Admitted {
		fmt.Fprintf(tw, "%s\tadmitted\t%d\t%d\t%s\t%s\t%s\n", j.Job, j.Priority, j.Resources.GPU, j.Resources.CPU, j.Resources.Memory, j.Since.Format("15:04:05"))
	}
	for i, j := range st.Queue {
		fmt.Fprintf(tw, "%s\tqueued #%d\t%d\t%d\t%s\t%s\t%s\n", j.Job, i+1, j.Priority, j.Resources.GPU, j.Resources.CPU, j.Resources.Memory, j.Since.Format("15:04:05"))
	}
	return tw.Flush()
}
