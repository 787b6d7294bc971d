package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
)

func newQuotaCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Show or set the workspace's resource quota (jobs in the quota pool wait in Queued while it is full)",
	}
	var (
		gpu         int64
		cpu, memory string
	)
	set := &cobra.Command{
		Use:   "set [--gpu N] [--cpu Q] [--memory Q]",
		Short: "Set the quota; a resource not given is unlimited",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := api.Quota{CPU: cpu, Memory: memory}
			if cmd.Flags().Changed("gpu") {
				q.GPU = &gpu
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.SetQuota(cmd.Context(), g.workspace, q); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "quota of workspace %s set\n", g.workspace)
			return nil
		},
	}
	set.Flags().Int64Var(&gpu, "gpu", 0, "GPUs")
	set.Flags().StringVar(&cpu, "cpu", "", `CPU cores, such as "64" or "500m"`)
	set.Flags().StringVar(&memory, "memory", "", `memory, such as "256Gi"`)

	get := &cobra.Command{
		Use:   "get",
		Short: "Show the quota, what is in use, and the queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			st, err := c.GetQuota(cmd.Context(), g.workspace)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, st)
			}
			limit := func(s string) string {
				if s == "" {
					return "unlimited"
				}
				return s
			}
			gpus := "unlimited"
			if st.Limits.GPU != nil {
				gpus = fmt.Sprint(*st.Limits.GPU)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
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
		},
	}
	cmd.AddCommand(set, get)
	return cmd
}
