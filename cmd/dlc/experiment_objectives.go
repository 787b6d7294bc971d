package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// What `dlc experiment get` shows of an experiment with several objectives.

// formatObjectives writes "maximize accuracy, minimize latency".
func formatObjectives(objs []schemas.ObjectiveSpec) string {
	parts := make([]string, len(objs))
	for i, o := range objs {
		parts[i] = fmt.Sprintf("%s %s", o.Direction, o.Metric)
	}
	return strings.Join(parts, ", ")
}

// printParetoFront writes the Pareto front's trials with their objective values.
func printParetoFront(w io.Writer, e *api.ExperimentDetail) {
	spec, st := e.Spec.Spec, e.Status
	if !spec.MultiObjective() {
		return
	}
	if len(st.ParetoFront) == 0 {
		fmt.Fprintf(w, "Pareto front: none yet (no trial has completed with every objective)\n")
		return
	}
	fmt.Fprintf(w, "Pareto front: %d trial(s), marked *\n", len(st.ParetoFront))
	for _, id := range st.ParetoFront {
		for _, t := range st.Trials {
			if t.ID != id {
				continue
			}
			var vals []string
			for _, o := range spec.Objectives {
				if v, ok := t.Values[o.Metric]; ok {
					vals = append(vals, fmt.Sprintf("%s=%.4g", o.Metric, v))
				}
			}
			fmt.Fprintf(w, "  trial %d: %s, %s\n", id, strings.Join(vals, " "), formatParams(spec.SearchSpace, t.Params))
		}
	}
}

// objectiveCells are a trial's objective columns: the value alone, or each
// objective's.
func objectiveCells(spec *schemas.ExperimentSpec, t schemas.TrialStatus, value string) []string {
	if !spec.MultiObjective() {
		return []string{value}
	}
	cells := make([]string, 0, len(spec.Objectives))
	for _, o := range spec.Objectives {
		if v, ok := t.Values[o.Metric]; ok {
			cells = append(cells, fmt.Sprintf("%.4g", v))
		} else {
			cells = append(cells, "-")
		}
	}
	return cells
}
