package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/runs"
)

// Run records (issue 41): what finished jobs, experiments and pipeline runs were, kept
// after Temporal forgets them; lineage; resource usage.

func newHistoryCmd(g *globals) *cobra.Command {
	var (
		q            client.HistoryQuery
		kind         string
		since, until string
	)
	cmd := &cobra.Command{
		Use:   "history [--kind K] [--name N] [-l k=v ...] [--phase P] [--since DURATION|TIME] [--until TIME] [--origin Kind[/name]] [--parent UID] [--checkpoint URI] [--limit N]",
		Short: "List the workspace's finished runs (jobs, experiments, pipeline runs), newest first; kept after Temporal forgets them",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			var err error
			if kind != "" {
				if q.Kind, err = recordKind(kind); err != nil {
					return err
				}
			}
			now := time.Now()
			if q.FinishedAfter, err = sinceFlag("since", since, now); err != nil {
				return err
			}
			if q.FinishedBefore, err = timeFlag("until", until); err != nil {
				return err
			}
			page, err := c.History(cmd.Context(), g.workspace, q)
			if err != nil {
				return err
			}
			return g.print(cmd, page, func(w io.Writer) error {
				if err := printTable(w, historyColumns, page.Records); err != nil {
					return err
				}
				if page.Next != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "more records: add --after %s\n", page.Next)
				}
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&kind, "kind", "", "only runs of this kind: job (TrainingJob), experiment or pipeline")
	f.StringVar(&q.Name, "name", "", "only runs of this name")
	f.StringArrayVarP(&q.Labels, "label", "l", nil, "only runs with this label, key=value (repeatable)")
	f.StringVar(&q.Phase, "phase", "", "only runs that ended in this phase, such as Failed")
	f.StringVar(&since, "since", "", "only runs that finished since then: a duration back from now (24h, 7d) or a time (RFC 3339 or YYYY-MM-DD)")
	f.StringVar(&until, "until", "", "only runs that finished before this time (RFC 3339 or YYYY-MM-DD)")
	f.StringVar(&q.Origin, "origin", "", "only runs started by this: User, Schedule, Trigger, Pipeline or Experiment, optionally /NAME (Schedule/nightly)")
	f.StringVar(&q.Parent, "parent", "", "only the runs of this experiment or pipeline run (its uid)")
	f.StringVar(&q.Checkpoint, "checkpoint", "", "only runs whose checkpoint, or one of whose inputs, starts with this URI")
	f.IntVar(&q.Limit, "limit", 0, "at most this many records, 1 to 1000 (default 100)")
	f.StringVar(&q.After, "after", "", "the page after this cursor (printed when there are more records)")
	cmd.AddCommand(newHistoryGetCmd(g))
	return cmd
}

func newHistoryGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get KIND UID",
		Short: "Print one run record in full (YAML by default; -o json): spec, attempts, metrics, checkpoint, inputs, origin",
		Args:  cobra.ExactArgs(2),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			kind, err := recordKind(args[0])
			if err != nil {
				return err
			}
			rec, err := c.HistoryRecord(cmd.Context(), g.workspace, kind, args[1])
			if err != nil {
				return err
			}
			return printObject(cmd.OutOrStdout(), g.format("yaml"), rec)
		}),
	}
}

func newLineageCmd(g *globals) *cobra.Command {
	var q client.LineageQuery
	cmd := &cobra.Command{
		Use:   "lineage --checkpoint URI | --schedule NAME",
		Short: "The runs that wrote or read a checkpoint (with their inputs), or every run a schedule started and their runs",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if (q.Checkpoint == "") == (q.Schedule == "") {
				return errors.New("lineage: give exactly one of --checkpoint and --schedule")
			}
			l, err := c.Lineage(cmd.Context(), g.workspace, q)
			if err != nil {
				return err
			}
			return g.print(cmd, l, func(w io.Writer) error {
				if err := printTable(w, lineageColumns, l.Records); err != nil {
					return err
				}
				if l.Truncated {
					fmt.Fprintln(cmd.ErrOrStderr(), "more records than one answer holds: the oldest are left out")
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&q.Checkpoint, "checkpoint", "", "a checkpoint or model URI, or a prefix of one (s3://bucket/prefix)")
	cmd.Flags().StringVar(&q.Schedule, "schedule", "", "a schedule's name")
	return cmd
}

func newUsageCmd(g *globals) *cobra.Command {
	var (
		q        client.UsageQuery
		from, to string
	)
	cmd := &cobra.Command{
		Use:   "usage [--workspace W ...] [--from TIME] [--to TIME] [--by-label KEY]",
		Short: "GPU-, CPU- and memory-hours per workspace and day, from the runs' attempts (default: the token's workspace, the last 30 days)",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			var err error
			if q.From, err = sinceFlag("from", from, time.Now()); err != nil {
				return err
			}
			if q.To, err = timeFlag("to", to); err != nil {
				return err
			}
			u, err := c.Usage(cmd.Context(), q)
			if err != nil {
				return err
			}
			return g.print(cmd, u, func(w io.Writer) error { return printUsage(w, u, q.GroupByLabel) })
		}),
	}
	f := cmd.Flags()
	// Usage may sum several workspaces: -w here is repeatable, and without it the
	// server answers the token's workspace (every workspace for an admin's token).
	f.StringArrayVarP(&q.Workspaces, "workspace", "w", nil, "only this workspace (repeatable); default the token's workspace, every workspace for an admin")
	f.StringVar(&from, "from", "", "start of the range: a time (RFC 3339 or YYYY-MM-DD) or a duration back from now (7d); default 30 days before --to")
	f.StringVar(&to, "to", "", "end of the range, excluded (RFC 3339 or YYYY-MM-DD); default now")
	f.StringVar(&q.GroupByLabel, "by-label", "", "group by this label's value as well")
	return cmd
}

// recordKind reads a run kind as the CLI names it: job, experiment or pipeline, or the
// document kind.
func recordKind(s string) (runs.Kind, error) {
	switch strings.ToLower(s) {
	case "job", "jobs", "trainingjob":
		return runs.KindJob, nil
	case "experiment", "experiments":
		return runs.KindExperiment, nil
	case "pipeline", "pipelines":
		return runs.KindPipeline, nil
	}
	return "", fmt.Errorf("kind %q: want job (TrainingJob), experiment or pipeline", s)
}

// timeFlag reads a time flag: RFC 3339 or a date (midnight UTC); zero when empty.
func timeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want a time (RFC 3339, such as 2026-01-02T15:04:05Z, or a date, 2026-01-02) or, for --since and --from, a duration such as 24h or 7d", name, v)
}

// sinceFlag reads a time flag that may also be a duration back from now: 90m, 24h,
// 7d.
func sinceFlag(name, v string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return timeFlag(name, v)
}

var historyColumns = []column[runs.Record]{
	{"FINISHED", func(r runs.Record) string { return r.Finished.UTC().Format(time.RFC3339) }},
	{"KIND", func(r runs.Record) string { return string(r.Kind) }},
	{"NAME", func(r runs.Record) string { return r.Name }},
	{"UID", func(r runs.Record) string { return r.UID }},
	{"PHASE", func(r runs.Record) string { return r.Phase }},
	{"ORIGIN", func(r runs.Record) string { return originString(r.Origin) }},
	{"DURATION", func(r runs.Record) string {
		if r.Started == nil {
			return "-"
		}
		return duration(*r.Started, &r.Finished)
	}},
	{"ATTEMPTS", func(r runs.Record) string {
		if len(r.Attempts) == 0 {
			return "-"
		}
		return strconv.Itoa(len(r.Attempts))
	}},
}

var lineageColumns = []column[runs.Record]{
	historyColumns[0], historyColumns[1], historyColumns[2], historyColumns[3], historyColumns[4], historyColumns[5],
	{"PARENT", func(r runs.Record) string { return dash(r.Parent) }},
	{"CHECKPOINT", func(r runs.Record) string { return dash(r.Checkpoint) }},
	{"INPUTS", func(r runs.Record) string { return dash(strings.Join(r.Inputs, ",")) }},
}

// originString is what started a run: Kind or Kind/name.
func originString(o runs.Origin) string {
	if o.Kind == "" {
		return "-"
	}
	if o.Name == "" {
		return o.Kind
	}
	return o.Kind + "/" + o.Name
}

// printUsage writes the usage rows and their total.
func printUsage(w io.Writer, u *api.Usage, byLabel string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	label := ""
	if byLabel != "" {
		label = strings.ToUpper(byLabel) + "\t"
	}
	fmt.Fprintf(tw, "DAY\tWORKSPACE\t%sGPU-H\tCPU-H\tGIB-H\tRUNS\n", label)
	var total runs.UsageRow
	for _, r := range u.Rows {
		if byLabel != "" {
			label = dash(r.Label) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%.2f\t%.2f\t%.2f\t%d\n", r.Day, r.Workspace, label, r.GPUHours, r.CPUHours, r.MemoryGiBHours, r.Runs)
		total.GPUHours += r.GPUHours
		total.CPUHours += r.CPUHours
		total.MemoryGiBHours += r.MemoryGiBHours
	}
	if byLabel != "" {
		label = "\t"
	}
	fmt.Fprintf(tw, "TOTAL\t\t%s%.2f\t%.2f\t%.2f\t\n", label, total.GPUHours, total.CPUHours, total.MemoryGiBHours)
	return tw.Flush()
}
