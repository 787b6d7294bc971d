package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/internal/plot"
	"github.com/opendlc/opendlc/schemas"
)

func newExperimentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "experiment",
		Aliases: []string{"experiments", "exp"},
		Short:   "Hyper-parameter search: experiments that run trials of a job template (docs/experiments.md)",
	}
	var (
		file string
		wait bool
	)
	create := &cobra.Command{
		Use:     "create -f FILE",
		Aliases: []string{"submit", "apply"},
		Short:   "Validate and start an experiment",
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
			e, err := c.CreateExperiment(cmd.Context(), data)
			if err != nil {
				return err
			}
			ws, name := e.Spec.Metadata.Workspace, e.Spec.Metadata.Name
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "experiment %s/%s created (uid %s)\n", ws, name, e.UID)
			if !wait {
				return nil
			}
			return waitExperiment(cmd, c, ws, name)
		},
	}
	create.Flags().StringVarP(&file, "file", "f", "", "experiment file (YAML or JSON); - for stdin")
	create.Flags().BoolVar(&wait, "wait", false, "follow the experiment until it ends, then show it; exit 1 unless it succeeded")
	_ = create.MarkFlagRequired("file")

	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show an experiment: its trials sorted by objective, and the best",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			e, err := c.GetExperiment(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, e)
			}
			return printExperiment(cmd.OutOrStdout(), e)
		},
	}

	var phase string
	var labels []string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's experiments",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			opts := client.ListOptions{Phase: phase, Labels: labels}
			var all []api.ExperimentSummary
			for {
				l, err := c.ListExperiments(cmd.Context(), g.workspace, opts)
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
				return printObject(cmd.OutOrStdout(), g.output, api.ExperimentList{Items: all})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPHASE\tAGE\tDURATION")
			for _, e := range all {
				dur := "-"
				if e.EndTime != nil {
					dur = e.EndTime.Sub(e.StartTime).Round(time.Second).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Phase, age(e.StartTime), dur)
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&phase, "phase", "", "only experiments in this phase")
	list.Flags().StringArrayVarP(&labels, "label", "l", nil, "only experiments with this label KEY=VALUE; repeatable")

	var reason string
	stop := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop an experiment's running trials; it waits to be resumed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.StopExperiment(cmd.Context(), g.workspace, args[0], reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "experiment %s: %s\n", args[0], r.Phase)
			return nil
		},
	}
	stop.Flags().StringVar(&reason, "reason", "", "why, recorded in the experiment's status")

	resume := &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a stopped experiment: its stopped trials run again, then new ones",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.ResumeExperiment(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "experiment %s: %s\n", args[0], r.Phase)
			return nil
		},
	}

	var maxTrials int
	extend := &cobra.Command{
		Use:   "extend NAME --max-trials N",
		Short: "Raise an experiment's maxTrials",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.ExtendExperiment(cmd.Context(), g.workspace, args[0], maxTrials)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "experiment %s: %s, maxTrials %d\n", args[0], r.Phase, r.MaxTrials)
			return nil
		},
	}
	extend.Flags().IntVar(&maxTrials, "max-trials", 0, "the new maxTrials")
	_ = extend.MarkFlagRequired("max-trials")

	var plotFile string
	plot := &cobra.Command{
		Use:   "plot NAME -o FILE.svg",
		Short: "Plot an experiment as SVG: objective by trial, and objective by each parameter",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			e, err := c.GetExperiment(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			svg := plot.ExperimentSVG(e)
			if plotFile == "-" {
				_, err = cmd.OutOrStdout().Write(svg)
				return err
			}
			if err := os.WriteFile(plotFile, svg, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d trials)\n", plotFile, len(e.Status.Trials))
			return nil
		},
	}
	// -o is the global output format elsewhere; here it names the SVG file.
	plot.Flags().StringVarP(&plotFile, "output", "o", "", "SVG file to write; - for stdout")
	_ = plot.MarkFlagRequired("output")

	cmd.AddCommand(create, get, list, stop, resume, extend, plot)
	return cmd
}

// waitExperiment follows an experiment until it ends, printing each trial as it
// finishes, then shows the experiment; exit 1 unless it succeeded.
func waitExperiment(cmd *cobra.Command, c *client.Client, ws, name string) error {
	out := cmd.OutOrStdout()
	reported := map[string]schemas.TrialPhase{}
	final, err := c.WaitExperiment(cmd.Context(), ws, name, time.Second, true, func(e *api.ExperimentDetail) {
		for _, t := range e.Status.Trials {
			if reported[t.Job] == t.Phase {
				continue
			}
			reported[t.Job] = t.Phase
			value := "-"
			if t.Value != nil {
				value = fmt.Sprintf("%.4g", *t.Value)
			}
			fmt.Fprintf(out, "%s  trial %-3d %-10s %-9s %s=%s  %s\n", time.Now().Format("15:04:05"), t.ID, t.Job,
				t.Phase, e.Spec.Spec.Objective.Metric, value, formatParams(e.Spec.Spec.SearchSpace, t.Params))
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	if err := printExperiment(out, final); err != nil {
		return err
	}
	if final.Status.Phase != schemas.ExperimentSucceeded {
		return exitError{code: 1}
	}
	return nil
}

// formatParams writes params in the order of the search space: "lr=0.1 l2=0.001".
func formatParams(space []schemas.ParameterSpec, params map[string]any) string {
	parts := make([]string, 0, len(space))
	for _, p := range space {
		v, ok := params[p.Name]
		if !ok {
			continue
		}
		if f, isNum := v.(float64); isNum {
			parts = append(parts, fmt.Sprintf("%s=%.4g", p.Name, f))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%v", p.Name, v))
		}
	}
	return strings.Join(parts, " ")
}

// sortedTrials returns the trials best first: those with a value by objective (ties by
// ID), then the others by ID.
func sortedTrials(e *api.ExperimentDetail) []schemas.TrialStatus {
	trials := append([]schemas.TrialStatus(nil), e.Status.Trials...)
	obj := e.Spec.Spec.Objective
	sort.SliceStable(trials, func(i, j int) bool {
		a, b := trials[i], trials[j]
		// Completed trials first, then pruned ones (their value is an intermediate one).
		ra, rb := trialRank(a), trialRank(b)
		if ra != rb {
			return ra < rb
		}
		if a.Value != nil && b.Value != nil && *a.Value != *b.Value {
			return obj.Better(*a.Value, *b.Value)
		}
		return a.ID < b.ID
	})
	return trials
}

func trialRank(t schemas.TrialStatus) int {
	switch {
	case t.Phase == schemas.TrialCompleted && t.Value != nil:
		return 0
	case t.Value != nil:
		return 1
	default:
		return 2
	}
}

func printExperiment(w io.Writer, e *api.ExperimentDetail) error {
	st, spec := e.Status, e.Spec.Spec
	fmt.Fprintf(w, "Name:        %s\nWorkspace:   %s\nUID:         %s\nPhase:       %s\n",
		e.Spec.Metadata.Name, e.Spec.Metadata.Workspace, e.UID, st.Phase)
	if st.Reason != "" || st.Message != "" {
		fmt.Fprintf(w, "Reason:      %s\nMessage:     %s\n", st.Reason, st.Message)
	}
	fmt.Fprintf(w, "Objective:   %s %s", spec.Objective.Direction, spec.Objective.Metric)
	if spec.Objective.Goal != nil {
		fmt.Fprintf(w, " (goal %g)", *spec.Objective.Goal)
	}
	fmt.Fprintf(w, "\nAlgorithm:   %s, seed %d; early stopping: %s\n", spec.Algorithm.Name, st.Seed, spec.EarlyStopping.Rule)
	fmt.Fprintf(w, "Trials:      %d of %d (%d running, %d completed, %d pruned, %d failed), %d at a time\n",
		len(st.Trials), st.MaxTrials, st.Running, st.Completed, st.Pruned, st.Failed, spec.Parallelism)
	if st.BestTrial != nil && st.BestValue != nil {
		fmt.Fprintf(w, "Best:        trial %d, %s = %g, %s\n", *st.BestTrial, spec.Objective.Metric, *st.BestValue,
			formatParams(spec.SearchSpace, st.BestParams))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"TRIAL", "JOB", "PHASE", strings.ToUpper(spec.Objective.Metric), "STEP"}
	for _, p := range spec.SearchSpace {
		header = append(header, strings.ToUpper(p.Name))
	}
	fmt.Fprintln(tw, "\n"+strings.Join(append(header, "MESSAGE"), "\t"))
	for _, t := range sortedTrials(e) {
		value, step := "-", "-"
		if t.Value != nil {
			value = fmt.Sprintf("%.4g", *t.Value)
		}
		if t.Step != 0 {
			step = fmt.Sprint(t.Step)
		}
		row := []string{fmt.Sprint(t.ID), t.Job, string(t.Phase), value, step}
		for _, p := range spec.SearchSpace {
			switch v := t.Params[p.Name].(type) {
			case float64:
				row = append(row, fmt.Sprintf("%.4g", v))
			case nil:
				row = append(row, "-")
			default:
				row = append(row, fmt.Sprint(v))
			}
		}
		if st.BestTrial != nil && *st.BestTrial == t.ID {
			row[0] += "*"
		}
		fmt.Fprintln(tw, strings.Join(append(row, t.Message), "\t"))
	}
	return tw.Flush()
}
