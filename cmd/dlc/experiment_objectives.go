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

// formatConstraints writes spec.constraints as "peak_memory_gb <= 16, 0 <= latency_ms <= 50".
func formatConstraints(cs []schemas.ConstraintSpec) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		switch {
		case c.Min != nil && c.Max != nil:
			parts[i] = fmt.Sprintf("%g <= %s <= %g", *c.Min, c.Metric, *c.Max)
		case c.Max != nil:
			parts[i] = fmt.Sprintf("%s <= %g", c.Metric, *c.Max)
		case c.Min != nil:
			parts[i] = fmt.Sprintf("%s >= %g", c.Metric, *c.Min)
		}
	}
	return strings.Join(parts, ", ")
}

// constraintCells are a trial's constraint metrics and whether it was feasible ("-"
// while unknown).
func constraintCells(spec *schemas.ExperimentSpec, t schemas.TrialStatus) []string {
	if len(spec.Constraints) == 0 {
		return nil
	}
	var out []string
	for _, c := range spec.Constraints {
		if v, ok := t.Constraints[c.Metric]; ok {
			out = append(out, fmt.Sprintf("%.4g", v))
		} else {
			out = append(out, "-")
		}
	}
	switch {
	case t.Feasible == nil:
		out = append(out, "-")
	case *t.Feasible:
		out = append(out, "yes")
	default:
		out = append(out, "no")
	}
	return out
}
