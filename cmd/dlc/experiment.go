package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/internal/plot"
	"github.com/opendlc/opendlc/schemas"
)

func newExperimentCmd(g *globals) *cobra.Command {
	var wait bool
	k := &kindCommands[api.ExperimentDetail, api.ExperimentSummary]{
		noun:    "experiment",
		aliases: []string{"experiments", "exp"},
		short:   "Hyper-parameter search: experiments that run trials of a job template (docs/experiments.md)",

		apply:        (*client.Client).CreateExperiment,
		applyVerb:    "create",
		applyAliases: []string{"submit", "apply"},
		applyShort:   "Validate and start an experiment",
		applied: func(e *api.ExperimentDetail) string {
			return fmt.Sprintf("experiment %s/%s created (uid %s)", e.Spec.Metadata.Workspace, e.Spec.Metadata.Name, e.UID)
		},
		applyFlags: func(f *pflag.FlagSet) {
			f.BoolVar(&wait, "wait", false, "follow the experiment until it ends, then show it; exit 1 unless it succeeded")
		},
		afterApply: func(cmd *cobra.Command, c *client.Client, e *api.ExperimentDetail) error {
			if !wait {
				return nil
			}
			return waitExperiment(cmd, c, e.Spec.Metadata.Workspace, e.Spec.Metadata.Name)
		},

		get:      (*client.Client).GetExperiment,
		getShort: "Show an experiment: its trials sorted by objective, and the best",
		show:     printExperiment,

		list:        paged((*client.Client).ListExperiments, func(l *api.ExperimentList) ([]api.ExperimentSummary, string) { return l.Items, l.NextPageToken }),
		listShort:   "List the workspace's experiments",
		listFilters: []string{"phase", "label"},
		columns: []column[api.ExperimentSummary]{
			{"NAME", func(e api.ExperimentSummary) string { return e.Name }},
			{"PHASE", func(e api.ExperimentSummary) string { return string(e.Phase) }},
			{"AGE", func(e api.ExperimentSummary) string { return age(e.StartTime) }},
			{"DURATION", func(e api.ExperimentSummary) string { return duration(e.StartTime, e.EndTime) }},
		},

		del:      (*client.Client).DeleteExperiment,
		delShort: "Delete an experiment",
	}
	k.more = func() []*cobra.Command {
		return []*cobra.Command{
			stopCmd(g, "experiment", "Stop an experiment's running trials; it waits to be resumed", "why, recorded in the experiment's status",
				(*client.Client).StopExperiment, func(r *api.ExperimentActionResult) any { return r.Phase }),
			g.nameCmd("resume NAME", "Resume a stopped experiment: its stopped trials run again, then new ones",
				func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
					r, err := c.ResumeExperiment(cmd.Context(), g.workspace, name)
					if err != nil {
						return nil, nil, err
					}
					return r, line("experiment %s: %s", name, r.Phase), nil
				}),
			newExtendCmd(g),
			newEnqueueCmd(g),
			newPlotCmd(g),
			newTrialsCmd(g),
		}
	}
	return k.command(g)
}

func newExtendCmd(g *globals) *cobra.Command {
	var maxTrials int
	cmd := g.nameCmd("extend NAME --max-trials N", "Raise an experiment's maxTrials",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			r, err := c.ExtendExperiment(cmd.Context(), g.workspace, name, maxTrials)
			if err != nil {
				return nil, nil, err
			}
			return r, line("experiment %s: %s, maxTrials %d", name, r.Phase, r.MaxTrials), nil
		})
	cmd.Flags().IntVar(&maxTrials, "max-trials", 0, "the new maxTrials")
	_ = cmd.MarkFlagRequired("max-trials")
	return cmd
}

func newEnqueueCmd(g *globals) *cobra.Command {
	var params []string
	var file string
	cmd := g.nameCmd("enqueue NAME (-p PARAM=VALUE ... | -f TRIALS.yaml)", "Run these parameters as the experiment's next trials, before the algorithm's suggestions",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			trials, err := enqueuedTrials(params, file)
			if err != nil {
				return nil, nil, err
			}
			r, err := c.EnqueueTrials(cmd.Context(), g.workspace, name, trials...)
			if err != nil {
				return nil, nil, err
			}
			return r, line("experiment %s: %d trial(s) enqueued", name, len(trials)), nil
		})
	cmd.Flags().StringArrayVarP(&params, "param", "p", nil, "PARAM=VALUE of one trial; give every search-space parameter (repeatable)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "a YAML or JSON list of parameter sets ([{lr: 0.01, layers: 3}, ...]); - for stdin")
	return cmd
}

// enqueuedTrials is one trial from -p flags, or the list in file.
func enqueuedTrials(params []string, file string) ([]map[string]any, error) {
	switch {
	case file != "" && len(params) > 0:
		return nil, errors.New("give either -p or -f, not both")
	case file != "":
		data, err := readSpecFile(file)
		if err != nil {
			return nil, err
		}
		var trials []map[string]any
		if err := yaml.Unmarshal(data, &trials); err != nil {
			return nil, fmt.Errorf("%s: want a list of parameter sets: %w", file, err)
		}
		return trials, nil
	case len(params) == 0:
		return nil, errors.New("give the trial's parameters with -p PARAM=VALUE, or a list with -f")
	}
	set := map[string]any{}
	for _, p := range params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-p %q: want PARAM=VALUE", p)
		}
		set[k] = v // the experiment reads numbers from strings
	}
	return []map[string]any{set}, nil
}

func newPlotCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "plot NAME -o FILE.svg",
		Short: "Plot an experiment as SVG: objective by trial, by each parameter, and the Pareto front with objectives",
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			e, err := c.GetExperiment(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			svg := plot.ExperimentSVG(e)
			if file == "-" {
				_, err = cmd.OutOrStdout().Write(svg)
				return err
			}
			if err := os.WriteFile(file, svg, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d trials)\n", file, len(e.Status.Trials))
			return nil
		}),
	}
	// -o is the global output format elsewhere; here it names the SVG file.
	cmd.Flags().StringVarP(&file, "output", "o", "", "SVG file to write; - for stdout")
	_ = cmd.MarkFlagRequired("output")
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
				t.Phase, e.Spec.Spec.PrimaryObjective().Metric, value, formatParams(e.Spec.Spec.SearchSpace, t.Params))
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
	obj := e.Spec.Spec.PrimaryObjective()
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
	if spec.MultiObjective() {
		fmt.Fprintf(w, "Objectives:  %s", formatObjectives(spec.Objectives))
	} else {
		fmt.Fprintf(w, "Objective:   %s %s%s", spec.Objective.Direction, spec.Objective.Metric, formatAggregate(spec.Objective))
	}
	if spec.Objective.Goal != nil {
		fmt.Fprintf(w, " (goal %g)", *spec.Objective.Goal)
	}
	fmt.Fprintf(w, "\nAlgorithm:   %s, seed %d; early stopping: %s\n", spec.Algorithm.Name, st.Seed, spec.EarlyStopping.Rule)
	fmt.Fprintf(w, "Trials:      %d of %d (%d running, %d completed, %d pruned, %d failed), %d at a time\n",
		len(st.Trials), st.MaxTrials, st.Running, st.Completed, st.Pruned, st.Failed, spec.Parallelism)
	if len(spec.Constraints) > 0 {
		fmt.Fprintf(w, "Constraints: %s\n", formatConstraints(spec.Constraints))
	}
	if st.WarmStart != nil {
		fmt.Fprintf(w, "Warm start:  %d earlier trial(s): %s\n", st.WarmStart.Trials, strings.Join(st.WarmStart.Notes, "; "))
	}
	if len(st.Queued) > 0 {
		fmt.Fprintf(w, "Queued:      %d enqueued trial(s) to run next\n", len(st.Queued))
	}
	if st.BestTrial != nil && st.BestValue != nil {
		fmt.Fprintf(w, "Best:        trial %d, %s = %g, %s\n", *st.BestTrial, spec.Objective.Metric, *st.BestValue,
			formatParams(spec.SearchSpace, st.BestParams))
	}
	printParetoFront(w, e)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"TRIAL", "JOB", "PHASE"}
	for _, o := range spec.AllObjectives() {
		header = append(header, strings.ToUpper(o.Metric))
	}
	for _, c := range spec.Constraints {
		header = append(header, strings.ToUpper(c.Metric))
	}
	if len(spec.Constraints) > 0 {
		header = append(header, "FEASIBLE")
	}
	header = append(header, "STEP")
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
			step = strconv.FormatInt(t.Step, 10)
		}
		row := append([]string{strconv.Itoa(t.ID), t.Job, string(t.Phase)}, objectiveCells(&spec, t, value)...)
		row = append(row, constraintCells(&spec, t)...)
		row = append(row, step)
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
		if (st.BestTrial != nil && *st.BestTrial == t.ID) || slices.Contains(st.ParetoFront, t.ID) {
			row[0] += "*"
		}
		fmt.Fprintln(tw, strings.Join(append(row, t.Message), "\t"))
	}
	return tw.Flush()
}

// formatAggregate says how a single objective is made of the reports: " = 1×accuracy
// - 0.001×latency_ms (mean of each)", " (best)"; "" for the last value of one metric.
func formatAggregate(o schemas.ObjectiveSpec) string {
	agg := o.Aggregate
	if agg == "" {
		agg = schemas.AggregateLast
	}
	if !o.Weighted() {
		if agg == schemas.AggregateLast {
			return ""
		}
		return " (" + string(agg) + ")"
	}
	var b strings.Builder
	b.WriteString(" =")
	for i, m := range o.Metrics {
		switch {
		case i == 0 && m.Weight < 0:
			fmt.Fprintf(&b, " -%g×%s", -m.Weight, m.Metric)
		case i == 0:
			fmt.Fprintf(&b, " %g×%s", m.Weight, m.Metric)
		case m.Weight < 0:
			fmt.Fprintf(&b, " - %g×%s", -m.Weight, m.Metric)
		default:
			fmt.Fprintf(&b, " + %g×%s", m.Weight, m.Metric)
		}
	}
	fmt.Fprintf(&b, " (%s of each)", agg)
	return b.String()
}
