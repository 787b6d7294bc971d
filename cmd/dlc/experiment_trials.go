package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// newTrialsCmd is `dlc experiment trials NAME [--phase P] [--id N]`: an experiment's
// trials as a resource (GET .../experiments/{name}/trials, or one trial with --id).
func newTrialsCmd(g *globals) *cobra.Command {
	var phase string
	id := -1
	cmd := g.nameCmd("trials NAME", "List an experiment's trials by ID (--phase to filter), or show one (--id)",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			if id >= 0 {
				t, err := c.GetTrial(cmd.Context(), g.workspace, name, id)
				if err != nil {
					return nil, nil, err
				}
				return t, func(w io.Writer) error { return printTrials(w, []schemas.TrialStatus{*t}) }, nil
			}
			l, err := c.ListTrials(cmd.Context(), g.workspace, name, phase)
			if err != nil {
				return nil, nil, err
			}
			return l, func(w io.Writer) error { return printTrialList(w, l) }, nil
		})
	cmd.Flags().StringVar(&phase, "phase", "", "only trials in this phase (Running, Completed, Pruned, Failed...)")
	cmd.Flags().IntVar(&id, "id", -1, "show only the trial with this ID")
	return cmd
}

func printTrialList(w io.Writer, l *api.TrialList) error {
	if err := printTrials(w, l.Items); err != nil {
		return err
	}
	if l.BestTrial != nil {
		_, err := fmt.Fprintf(w, "best: trial %d\n", *l.BestTrial)
		return err
	}
	return nil
}

// printTrials writes one row per trial, by ID: its job, phase, attempts, objective
// value, step and parameters.
func printTrials(w io.Writer, trials []schemas.TrialStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIAL\tJOB\tPHASE\tATTEMPTS\tVALUE\tSTEP\tPARAMS\tMESSAGE")
	for _, t := range trials {
		value, step := "-", "-"
		if t.Value != nil {
			value = fmt.Sprintf("%.4g", *t.Value)
		}
		if t.Step != 0 {
			step = strconv.FormatInt(t.Step, 10)
		}
		names := make([]string, 0, len(t.Params))
		for k := range t.Params {
			names = append(names, k)
		}
		sort.Strings(names)
		params := make([]string, 0, len(names))
		for _, k := range names {
			v := t.Params[k]
			if f, ok := v.(float64); ok {
				params = append(params, fmt.Sprintf("%s=%.4g", k, f))
			} else {
				params = append(params, fmt.Sprintf("%s=%v", k, v))
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.Job, t.Phase, t.Attempts, value, step,
			strings.Join(params, ","), t.Message)
	}
	return tw.Flush()
}
