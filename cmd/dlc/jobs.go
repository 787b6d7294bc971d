package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
)

func newJobCmd(g *globals) *cobra.Command {
	var purge bool
	k := &kindCommands[api.Job, api.JobSummary]{
		noun:    "job",
		aliases: []string{"jobs"},
		short:   "Training jobs: submit, follow, describe, stop, clone and delete them",

		apply:        (*client.Client).SubmitJob,
		applyVerb:    "submit",
		applyAliases: []string{"apply", "create"},
		applyShort:   "Submit a job and return at once",
		applied: func(j *api.Job) string {
			return fmt.Sprintf("job %s/%s submitted (uid %s)", j.Spec.Metadata.Workspace, j.Spec.Metadata.Name, j.UID)
		},

		get:      (*client.Client).GetJob,
		getShort: "Show a job's summary, or print its spec (-o yaml re-submits as is; -o command: a dlc command and a Go program that recreate it)",
		show:     func(w io.Writer, j *api.Job) error { return printTable(w, jobColumns, []api.JobSummary{summaryOf(j)}) },
		view:     func(j *api.Job) any { return j.Spec },
		// -o command prints what recreates the job (recreate.go).
		getFormats: map[string]func(io.Writer, *api.Job) error{"command": printRecreate},

		list:        paged((*client.Client).ListJobs, func(l *api.JobList) ([]api.JobSummary, string) { return l.Items, l.NextPageToken }),
		listShort:   "List the workspace's jobs",
		listFilters: []string{"phase", "framework", "label"},
		columns:     jobColumns,

		del:      deleteJob(&purge),
		delShort: "Stop a job if it runs and delete it (its record, events and logs stay readable by uid; --purge removes them)",
	}
	k.more = func() []*cobra.Command {
		return []*cobra.Command{newDescribeCmd(g), newLogsCmd(g), newStopCmd(g), newScaleCmd(g), newJobPriorityCmd(g), newCloneCmd(g), newRunCmd(g), newTopCmd(g)}
	}
	cmd := k.command(g)
	addPurgeFlag(cmd, &purge)
	return cmd
}

var jobColumns = []column[api.JobSummary]{
	{"NAME", func(j api.JobSummary) string { return j.Name }},
	{"PHASE", func(j api.JobSummary) string { return string(j.Phase) }},
	{"AGE", func(j api.JobSummary) string { return age(j.StartTime) }},
	{"DURATION", func(j api.JobSummary) string { return duration(j.StartTime, j.EndTime) }},
}

// duration is how long something ran, "-" while it runs.
func duration(start time.Time, end *time.Time) string {
	if end == nil {
		return "-"
	}
	return end.Sub(start).Round(time.Second).String()
}

func summaryOf(j *api.Job) api.JobSummary {
	s := api.JobSummary{Name: j.Spec.Metadata.Name, Workspace: j.Spec.Metadata.Workspace, UID: j.UID, Phase: j.Status.Phase}
	if j.Status.StartTime != nil {
		s.StartTime = *j.Status.StartTime
	}
	s.EndTime = j.Status.FinishTime
	return s
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

func newDescribeCmd(g *globals) *cobra.Command {
	return g.nameCmd("describe NAME", "Show a job's status: phase, conditions, replicas and timeline",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			j, err := c.GetJob(cmd.Context(), g.workspace, name)
			return j, func(w io.Writer) error { describeJob(w, j); return nil }, err
		})
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
			code = strconv.Itoa(int(*r.ExitCode))
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
	var opts client.LogOptions
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print a job's logs (kept in JetStream after the replicas are gone)",
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			out := cmd.OutOrStdout()
			return c.Logs(cmd.Context(), g.workspace, args[0], opts, func(r events.LogRecord) error {
				_, err := fmt.Fprintln(out, formatLogLine(r))
				return err
			})
		}),
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep printing until the job ends")
	cmd.Flags().StringVar(&opts.Replica, "replica", "", "only this replica, such as worker-0")
	return cmd
}

// formatLogLine prints a record as "[role-index] line", with the attempt from the second
// one on ("[worker-1 attempt 1] line"): a restarted gang's replicas print under the same
// names, and their lines would read as repeats.
func formatLogLine(r events.LogRecord) string {
	prefix := fmt.Sprintf("%s-%d", r.Role, r.Index)
	if r.Attempt > 0 {
		prefix += fmt.Sprintf(" attempt %d", r.Attempt)
	}
	return fmt.Sprintf("[%s] %s", prefix, strings.TrimRight(r.Line, "\r\n"))
}

func newStopCmd(g *globals) *cobra.Command {
	return stopCmd(g, "job", "Stop a job and wait until every replica is gone", "why (recorded in the timeline)",
		(*client.Client).StopJob, func(r *api.StopResult) any { return r.Phase })
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
