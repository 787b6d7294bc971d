package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
)

func newScheduleCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedule",
		Aliases: []string{"schedules", "sched"},
		Short:   "Manage schedules: jobs, experiments or pipelines run at the times a cron expression names (periodic retraining)",
	}
	var file string
	create := &cobra.Command{
		Use:   "create -f FILE",
		Short: "Create a schedule",
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
			s, err := c.CreateSchedule(cmd.Context(), data)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s/%s created (%s, %s)\n", s.Spec.Metadata.Workspace,
				s.Spec.Metadata.Name, s.Spec.Spec.Cron, s.Spec.Spec.TimeZone)
			return nil
		},
	}
	create.Flags().StringVarP(&file, "file", "f", "", "schedule file (YAML or JSON); - for stdin")
	_ = create.MarkFlagRequired("file")

	var updateFile string
	update := &cobra.Command{
		Use:   "update -f FILE",
		Short: "Replace a schedule's spec; the next fire time follows at once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readSpecFile(updateFile)
			if err != nil {
				return err
			}
			doc, err := schemas.DecodeSchedule(data)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			s, err := c.UpdateSchedule(cmd.Context(), doc.Metadata.Workspace, doc.Metadata.Name, data)
			if err != nil {
				return err
			}
			return printSchedule(cmd.OutOrStdout(), g.output, s)
		},
	}
	update.Flags().StringVarP(&updateFile, "file", "f", "", "schedule file (YAML or JSON); - for stdin")
	_ = update.MarkFlagRequired("file")

	var next int
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a schedule: its spec, next fire times, running runs and history (-o yaml for all of it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			s, err := c.GetSchedule(cmd.Context(), g.workspace, args[0], next)
			if err != nil {
				return err
			}
			return printSchedule(cmd.OutOrStdout(), g.output, s)
		},
	}
	get.Flags().IntVar(&next, "next", 5, "how many next fire times to show (1 to 100)")

	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the workspace's schedules",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var all []api.ScheduleSummary
			token := ""
			for {
				l, err := c.ListSchedules(cmd.Context(), g.workspace, 0, token)
				if err != nil {
					return err
				}
				all = append(all, l.Items...)
				if token = l.NextPageToken; token == "" {
					break
				}
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, api.ScheduleList{Items: all})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCRON\tTIME ZONE\tSTATE\tAGE")
			for _, s := range all {
				state := "Active"
				if s.Paused {
					state = "Paused"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.TimeZone, state, age(s.CreateTime))
			}
			return tw.Flush()
		},
	}

	var noteText string
	pause := &cobra.Command{
		Use:   "pause NAME",
		Short: "Pause scheduled runs (trigger and backfill still work); times passing meanwhile are not caught up",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			s, err := c.PauseSchedule(cmd.Context(), g.workspace, args[0], noteText)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s paused\n", args[0])
			return nil
		},
	}
	pause.Flags().StringVar(&noteText, "note", "", "why (shown by get)")

	resume := &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume scheduled runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			s, err := c.ResumeSchedule(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, s)
			}
			msg := "no further fire time"
			if len(s.Status.Next) > 0 {
				msg = "next run at " + formatScheduleTime(s.Status.Next[0].FireTime, s.Spec.Spec.TimeZone)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s resumed; %s\n", args[0], msg)
			return nil
		},
	}

	var triggerPolicy string
	trigger := &cobra.Command{
		Use:   "trigger NAME",
		Short: "Run the schedule's action now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.TriggerSchedule(cmd.Context(), g.workspace, args[0], schedule.OverlapPolicy(triggerPolicy))
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, r)
			}
			fmt.Fprintln(cmd.OutOrStdout(), describeRun(r.Run))
			return nil
		},
	}
	trigger.Flags().StringVar(&triggerPolicy, "overlap", "", "overlap policy for this run (default: the schedule's); allowAll runs it alongside running runs")

	var from, to, backfillPolicy string
	backfill := &cobra.Command{
		Use:   "backfill NAME --from TIME --to TIME",
		Short: "Run every time of [from, to) the schedule names, once each (one after another by default)",
		Long: "Run every time of [from, to) the schedule's expression names, once each, ignoring pause and the\n" +
			"start and end times. A time already run is not run again. TIME is RFC 3339 (2026-01-02T02:00:00+08:00),\n" +
			"a date (2026-01-02, midnight UTC), \"now\", or a duration before now (-48h).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			f, err := parseBackfillTime(from, now)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			t, err := parseBackfillTime(to, now)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.BackfillSchedule(cmd.Context(), g.workspace, args[0], f, t, schedule.OverlapPolicy(backfillPolicy))
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d time(s) in [%s, %s)\n", len(r.Runs), f.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
			for _, run := range r.Runs {
				fmt.Fprintln(cmd.OutOrStdout(), "  "+describeRun(run))
			}
			return nil
		},
	}
	backfill.Flags().StringVar(&from, "from", "", "start of the range (inclusive)")
	backfill.Flags().StringVar(&to, "to", "now", "end of the range (exclusive)")
	backfill.Flags().StringVar(&backfillPolicy, "overlap", "", "bufferAll (default: one after another) or allowAll (all at once)")
	_ = backfill.MarkFlagRequired("from")

	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule (the jobs it started are left alone)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSchedule(cmd.Context(), g.workspace, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, update, get, list, pause, resume, trigger, backfill, del)
	return cmd
}

// parseBackfillTime reads RFC 3339, a date (midnight UTC), "now", or "-<duration>"
// before now.
func parseBackfillTime(s string, now time.Time) (time.Time, error) {
	switch {
	case s == "now":
		return now, nil
	case strings.HasPrefix(s, "-"):
		d, err := time.ParseDuration(s[1:])
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not a duration such as -48h", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: use RFC 3339 (2026-01-02T02:00:00+08:00), a date (2026-01-02), now, or -48h", s)
}

// printSchedule writes a schedule as a summary (table) or as YAML or JSON.
func printSchedule(w io.Writer, format string, s *api.ScheduleView) error {
	if format != "table" {
		return printObject(w, format, s)
	}
	sp, st := s.Spec.Spec, s.Status
	zone := sp.TimeZone
	fmt.Fprintf(w, "Name:          %s\nWorkspace:     %s\nCron:          %s\nTime zone:     %s\n",
		s.Spec.Metadata.Name, s.Spec.Metadata.Workspace, sp.Cron, zone)
	state := "Active"
	if st.Paused {
		state = "Paused"
		if st.PauseNote != "" {
			state += " (" + st.PauseNote + ")"
		}
	}
	fmt.Fprintf(w, "State:         %s\nAction:        %s\nOverlap:       %s\nCatch-up:      %s\n", state, sp.Action.Kind(),
		sp.OverlapPolicy, sp.CatchupWindow.D())
	if sp.Jitter > 0 {
		fmt.Fprintf(w, "Jitter:        %s\n", sp.Jitter.D())
	}
	if sp.StartTime != nil || sp.EndTime != nil {
		fmt.Fprintf(w, "Between:       %s and %s\n", optionalTime(sp.StartTime, zone), optionalTime(sp.EndTime, zone))
	}
	if sp.RunOptions.ResumeFromPreviousCheckpoint {
		fmt.Fprintln(w, "Resume:        from the previous run's checkpoint")
	}
	if u := sp.RunOptions.SkipIfNoNewDataUnder; u != "" {
		fmt.Fprintf(w, "Skip unless:   new data under %s\n", u)
	}
	c := st.Counts
	fmt.Fprintf(w, "Runs:          %d started, %d skipped, %d missed, %d without new data\n", c.Started, c.Skipped, c.Missed, c.NoNewData)
	if st.LastCheckpoint != "" {
		fmt.Fprintf(w, "Checkpoint:    %s\n", st.LastCheckpoint)
	}

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nNext:\n  NOMINAL TIME\tFIRES AT")
	if len(st.Next) == 0 {
		fmt.Fprintln(tw, "  (none)\t")
	}
	for _, n := range st.Next {
		fmt.Fprintf(tw, "  %s\t%s\n", formatScheduleTime(n.NominalTime, zone), formatScheduleTime(n.FireTime, zone))
	}
	if len(st.Buffered) > 0 {
		fmt.Fprintln(tw, "\nWaiting (overlap policy):\n  NOMINAL TIME\tTRIGGER\tKIND\tRUN")
		for _, r := range st.Buffered {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", formatScheduleTime(r.NominalTime, zone), r.Trigger, runKind(r), r.Job)
		}
	}
	fmt.Fprintln(tw, "\nHistory:\n  NOMINAL TIME\tTRIGGER\tSTARTED\tKIND\tRUN\tOUTCOME\tMESSAGE")
	for i := len(st.History) - 1; i >= 0; i-- { // newest first
		r := st.History[i]
		job := r.Job
		if job == "" {
			job = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", formatScheduleTime(r.NominalTime, zone), r.Trigger,
			optionalTime(r.StartTime, zone), runKind(r), job, r.Outcome, r.Message)
	}
	return tw.Flush()
}

// runKind is what a run started: TrainingJob, Experiment or Pipeline. Runs recorded
// before schedules could start anything but jobs have no kind: they are jobs.
func runKind(r schemas.ScheduleRun) schemas.Kind {
	if r.Kind == "" {
		return schemas.KindTrainingJob
	}
	return r.Kind
}

// describeRun says in one line what became of a run.
func describeRun(r schemas.ScheduleRun) string {
	s := fmt.Sprintf("%s %s: %s", r.NominalTime.UTC().Format(time.RFC3339), r.Trigger, r.Outcome)
	if r.Job != "" {
		noun := "job"
		switch runKind(r) {
		case schemas.KindExperiment:
			noun = "experiment"
		case schemas.KindPipeline:
			noun = "pipeline"
		}
		s += " (" + noun + " " + r.Job + ")"
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}

// formatScheduleTime shows a time in the schedule's zone.
func formatScheduleTime(t time.Time, zone string) string {
	if loc, err := schedule.LoadLocation(zone); err == nil {
		t = t.In(loc)
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

func optionalTime(t *time.Time, zone string) string {
	if t == nil {
		return "-"
	}
	return formatScheduleTime(*t, zone)
}
