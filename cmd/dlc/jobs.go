package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
)

func newSubmitCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:     "submit -f FILE",
		Aliases: []string{"apply", "create"},
		Short:   "Submit a job and return at once",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			j, err := c.SubmitJob(cmd.Context(), data)
			if err != nil {
				return err
			}
			if g.output == "table" {
				fmt.Fprintf(cmd.OutOrStdout(), "job %s/%s submitted (uid %s)\n", j.Spec.Metadata.Workspace, j.Spec.Metadata.Name, j.UID)
				return nil
			}
			return printObject(cmd.OutOrStdout(), g.output, j)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "spec file (YAML or JSON); - for stdin")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func newGetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get (jobs | job NAME)",
		Short: "List jobs, or print one job's spec (-o yaml re-submits as is)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && (args[0] == "jobs" || args[0] == "job"):
				return listJobs(cmd, g, client.ListOptions{})
			case len(args) == 2 && (args[0] == "job" || args[0] == "jobs"):
				c, err := g.client()
				if err != nil {
					return err
				}
				j, err := c.GetJob(cmd.Context(), g.workspace, args[1])
				if err != nil {
					return err
				}
				if g.output == "table" {
					return printJobTable(cmd.OutOrStdout(), []api.JobSummary{summaryOf(j)})
				}
				return printObject(cmd.OutOrStdout(), g.output, j.Spec)
			default:
				return fmt.Errorf("usage: dlc get jobs | dlc get job NAME")
			}
		},
	}
	return cmd
}

func newListCmd(g *globals) *cobra.Command {
	var opts client.ListOptions
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the workspace's jobs",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return listJobs(cmd, g, opts) },
	}
	cmd.Flags().StringVar(&opts.Phase, "phase", "", "only jobs in this phase")
	cmd.Flags().StringVar(&opts.Framework, "framework", "", "only jobs of this framework")
	cmd.Flags().StringArrayVarP(&opts.Labels, "label", "l", nil, "only jobs with this label KEY=VALUE; repeatable")
	return cmd
}

func listJobs(cmd *cobra.Command, g *globals, opts client.ListOptions) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	var all []api.JobSummary
	for {
		l, err := c.ListJobs(cmd.Context(), g.workspace, opts)
		if err != nil {
			return err
		}
		all = append(all, l.Items...)
		if l.NextPageToken == "" {
			break
		}
		opts.PageToken = l.NextPageToken
	}
	if g.output != "table" {
		return printObject(cmd.OutOrStdout(), g.output, api.JobList{Items: all})
	}
	return printJobTable(cmd.OutOrStdout(), all)
}

func summaryOf(j *api.Job) api.JobSummary {
	s := api.JobSummary{Name: j.Spec.Metadata.Name, Workspace: j.Spec.Metadata.Workspace, UID: j.UID, Phase: j.Status.Phase}
	if j.Status.StartTime != nil {
		s.StartTime = *j.Status.StartTime
	}
	s.EndTime = j.Status.FinishTime
	return s
}

func printJobTable(w io.Writer, jobs []api.JobSummary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tAGE\tDURATION")
	for _, j := range jobs {
		dur := "-"
		if j.EndTime != nil {
			dur = j.EndTime.Sub(j.StartTime).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.Name, j.Phase, age(j.StartTime), dur)
	}
	return tw.Flush()
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

func newDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a job's status: phase, conditions, replicas and timeline",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			j, err := c.GetJob(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, j)
			}
			describeJob(cmd.OutOrStdout(), j)
			return nil
		},
	}
}

func describeJob(w io.Writer, j *api.Job) {
	st := j.Status
	fmt.Fprintf(w, "Name:        %s\nWorkspace:   %s\nUID:         %s\nFramework:   %s\nPhase:       %s\n",
		j.Spec.Metadata.Name, j.Spec.Metadata.Workspace, j.UID, j.Spec.Spec.Framework, st.Phase)
	if st.Reason != "" || st.Message != "" {
		fmt.Fprintf(w, "Reason:      %s\nMessage:     %s\n", st.Reason, st.Message)
	}
	fmt.Fprintf(w, "Attempt:     %d\n", st.Attempt)
	if st.ExitCode != nil {
		fmt.Fprintf(w, "Exit code:   %d\n", *st.ExitCode)
	}
	if st.LastCheckpoint != "" {
		fmt.Fprintf(w, "Checkpoint:  %s\n", st.LastCheckpoint)
	}
	if st.Restarts+st.Preemptions > 0 || len(st.ExcludedNodes) > 0 {
		fmt.Fprintf(w, "Restarts:    %d (preemptions %d)\n", st.Restarts, st.Preemptions)
	}
	if len(st.ExcludedNodes) > 0 {
		fmt.Fprintf(w, "Excluded:    %s\n", strings.Join(st.ExcludedNodes, ", "))
	}
	if len(st.Metrics) > 0 {
		keys := make([]string, 0, len(st.Metrics))
		for k := range st.Metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%g", k, st.Metrics[k])
		}
		fmt.Fprintf(w, "Metrics:     %s\n", strings.Join(parts, " "))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nConditions:\n  TYPE\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	fmt.Fprintln(tw, "\nReplicas:\n  NAME\tPHASE\tEXIT\tNODE\tMESSAGE")
	for _, r := range st.Replicas {
		code := "-"
		if r.ExitCode != nil {
			code = fmt.Sprint(*r.ExitCode)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.Name, r.Phase, code, r.Node, r.Message)
	}
	if len(st.Attempts) > 1 || (len(st.Attempts) == 1 && st.Attempts[0].Class != "") {
		fmt.Fprintln(tw, "\nAttempts:\n  #\tSTART\tOUTCOME\tCLASS\tACTION\tNODE\tRESUMED FROM")
		for _, a := range st.Attempts {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.StartTime.Local().Format("15:04:05.000"),
				a.Outcome, dash(string(a.Class)), dash(a.Action), dash(a.Node), dash(a.ResumedFrom))
		}
	}
	if len(st.Health) > 0 {
		fmt.Fprintln(tw, "\nHealth check:\n  NODE\tHEALTHY\tREASON\tMESSAGE")
		for _, h := range st.Health {
			fmt.Fprintf(tw, "  %s\t%v\t%s\t%s\n", h.Node, h.Healthy, h.Reason, h.Message)
		}
	}
	fmt.Fprintln(tw, "\nTimeline:\n  TIME\tPHASE\tREASON\tMESSAGE")
	for _, e := range st.Timeline {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05.000"), e.Phase, e.Reason, e.Message)
	}
	_ = tw.Flush()
}

func newLogsCmd(g *globals) *cobra.Command {
	var follow bool
	var replica string
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print a job's logs (kept in JetStream after the replicas are gone)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			return c.Logs(cmd.Context(), g.workspace, args[0], client.LogOptions{Follow: follow, Replica: replica},
				func(r events.LogRecord) error {
					_, err := fmt.Fprintln(out, formatLogLine(r))
					return err
				})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the job ends")
	cmd.Flags().StringVar(&replica, "replica", "", "only this replica, such as worker-0")
	return cmd
}

func formatLogLine(r events.LogRecord) string {
	return fmt.Sprintf("[%s-%d] %s", r.Role, r.Index, strings.TrimRight(r.Line, "\r\n"))
}

func newStopCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a job and wait until every replica is gone",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.StopJob(cmd.Context(), g.workspace, args[0], reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s: %s\n", args[0], r.Phase)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the timeline)")
	return cmd
}

func newDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Stop a job if it runs and delete it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteJob(cmd.Context(), g.workspace, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s deleted\n", args[0])
			return nil
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
