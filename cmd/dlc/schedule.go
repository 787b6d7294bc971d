package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
)

func newScheduleCmd(g *globals) *cobra.Command {
	var next int
	k := &kindCommands[api.ScheduleView, api.ScheduleSummary]{
		noun:    "schedule",
		aliases: []string{"schedules", "sched"},
		short:   "Manage schedules: jobs, experiments or pipelines run at the times a cron expression names (periodic retraining)",

		apply:        (*client.Client).CreateSchedule,
		applyVerb:    "create",
		applyAliases: []string{"apply"},
		applyShort:   "Create a schedule",
		applied: func(s *api.ScheduleView) string {
			return fmt.Sprintf("schedule %s/%s created (%s, %s)", s.Spec.Metadata.Workspace, s.Spec.Metadata.Name, s.Spec.Spec.Cron, s.Spec.Spec.TimeZone)
		},

		get: func(c *client.Client, ctx context.Context, ws, name string) (*api.ScheduleView, error) {
			return c.GetSchedule(ctx, ws, name, next)
		},
		getShort: "Show a schedule: its spec, next fire times, running runs and history (-o yaml for all of it)",
		getFlags: func(f *pflag.FlagSet) { f.IntVar(&next, "next", 5, "how many next fire times to show (1 to 100)") },
		show:     func(w io.Writer, s *api.ScheduleView) error { return printSchedule(w, "table", s) },

		list: func(c *client.Client, ctx context.Context, ws string, opts client.ListOptions) ([]api.ScheduleSummary, string, error) {
			l, err := c.ListSchedules(ctx, ws, opts.Limit, opts.PageToken)
			if err != nil {
				return nil, "", err
			}
			return l.Items, l.NextPageToken, nil
		},
		listShort: "List the workspace's schedules",
		columns: []column[api.ScheduleSummary]{
			{"NAME", func(s api.ScheduleSummary) string { return s.Name }},
			{"CRON", func(s api.ScheduleSummary) string { return s.Cron }},
			{"TIME ZONE", func(s api.ScheduleSummary) string { return s.TimeZone }},
			{"STATE", func(s api.ScheduleSummary) string { return scheduleState(s.Paused) }},
			{"AGE", func(s api.ScheduleSummary) string { return age(s.CreateTime) }},
		},

		del:      (*client.Client).DeleteSchedule,
		delShort: "Delete a schedule (the jobs it started are left alone)",
	}
	k.more = func() []*cobra.Command {
		return []*cobra.Command{newScheduleUpdateCmd(g), newSchedulePauseCmd(g), newScheduleResumeCmd(g), newScheduleTriggerCmd(g), newBackfillCmd(g)}
	}
	return k.command(g)
}

func scheduleState(paused bool) string {
	if paused {
		return "Paused"
	}
	return "Active"
}

func newScheduleUpdateCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "update -f FILE",
		Short: "Replace a schedule's spec; the next fire time follows at once",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			doc, err := schemas.DecodeSchedule(data)
			if err != nil {
				return err
			}
			s, err := c.UpdateSchedule(cmd.Context(), doc.Metadata.Workspace, doc.Metadata.Name, data)
			if err != nil {
				return err
			}
			return printSchedule(cmd.OutOrStdout(), g.output, s)
		}),
	}
	fileFlag(cmd, &file, "schedule")
	return cmd
}

func newSchedulePauseCmd(g *globals) *cobra.Command {
	var note string
	cmd := g.nameCmd("pause NAME", "Pause scheduled runs (trigger and backfill still work); times passing meanwhile are not caught up",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			s, err := c.PauseSchedule(cmd.Context(), g.workspace, name, note)
			if err != nil {
				return nil, nil, err
			}
			return s, line("schedule %s paused", name), nil
		})
	cmd.Flags().StringVar(&note, "note", "", "why (shown by get)")
	return cmd
}

func newScheduleResumeCmd(g *globals) *cobra.Command {
	return g.nameCmd("resume NAME", "Resume scheduled runs",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			s, err := c.ResumeSchedule(cmd.Context(), g.workspace, name)
			if err != nil {
				return nil, nil, err
			}
			msg := "no further fire time"
			if len(s.Status.Next) > 0 {
				msg = "next run at " + formatScheduleTime(s.Status.Next[0].FireTime, s.Spec.Spec.TimeZone)
			}
			return s, line("schedule %s resumed; %s", name, msg), nil
		})
}

func newScheduleTriggerCmd(g *globals) *cobra.Command {
	var policy string
	cmd := g.nameCmd("trigger NAME", "Run the schedule's action now",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			r, err := c.TriggerSchedule(cmd.Context(), g.workspace, name, schedule.OverlapPolicy(policy))
			if err != nil {
				return nil, nil, err
			}
			return r, line("%s", describeRun(r.Run)), nil
		})
	cmd.Flags().StringVar(&policy, "overlap", "", "overlap policy for this run (default: the schedule's); allowAll runs it alongside running runs")
	return cmd
}

func newBackfillCmd(g *globals) *cobra.Command {
	var from, to, policy string
	cmd := g.nameCmd("backfill NAME --from TIME --to TIME", "Run every time of [from, to) the schedule names, once each (one after another by default)",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			now := time.Now()
			f, err := parseBackfillTime(from, now)
			if err != nil {
				return nil, nil, fmt.Errorf("--from: %w", err)
			}
			t, err := parseBackfillTime(to, now)
			if err != nil {
				return nil, nil, fmt.Errorf("--to: %w", err)
			}
			r, err := c.BackfillSchedule(cmd.Context(), g.workspace, name, f, t, schedule.OverlapPolicy(policy))
			if err != nil {
				return nil, nil, err
			}
			return r, func(w io.Writer) error {
				fmt.Fprintf(w, "%d time(s) in [%s, %s)\n", len(r.Runs), f.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
				for _, run := range r.Runs {
					fmt.Fprintln(w, "  "+describeRun(run))
				}
				return nil
			}, nil
		})
	cmd.Long = "Run every time of [from, to) the schedule's expression names, once each, ignoring pause and the\n" +
		"start and end times. A time already run is not run again. TIME is RFC 3339 (2026-01-02T02:00:00+08:00),\n" +
		"a date (2026-01-02, midnight UTC), \"now\", or a duration before now (-48h)."
	cmd.Flags().StringVar(&from, "from", "", "start of the range (inclusive)")
	cmd.Flags().StringVar(&to, "to", "now", "end of the range (exclusive)")
	cmd.Flags().StringVar(&policy, "overlap", "", "bufferAll (default: one after another) or allowAll (all at once)")
	_ = cmd.MarkFlagRequired("from")
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
	state := scheduleState(st.Paused)
	if st.Paused && st.PauseNote != "" {
		state += " (" + st.PauseNote + ")"
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
	for _, r := range slices.Backward(st.History) { // newest first

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
