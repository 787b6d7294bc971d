package console

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// paramChart is one per-parameter chart of an experiment page, with what its x axis
// means for a categorical parameter.
type paramChart struct {
	chart
	// Param is the parameter's name.
	Param string
	// Categories name the x positions 0, 1, ... of a parameter whose values are not
	// all numbers; empty for a numeric one.
	Categories []string
}

// paramCharts are one chart per parameter of the search space: the objective of each
// trial that reported one against the trial's value of that parameter, pruned trials
// as a series of their own. A parameter whose values are all numbers is drawn on a
// numeric axis; any other is drawn by category, in sorted order.
func paramCharts(exp *api.ExperimentDetail, params []string) []paramChart {
	obj := exp.Spec.Spec.Objective
	var out []paramChart
	for _, p := range params {
		values := map[string]bool{}
		numeric := true
		for _, t := range exp.Status.Trials {
			if t.Value == nil || t.Params[p] == nil {
				continue
			}
			v := formatParam(t.Params[p])
			values[v] = true
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				numeric = false
			}
		}
		pc := paramChart{Param: p, chart: chart{ID: "param-" + p, Title: fmt.Sprintf("%s by %s", obj.Metric, p), XLabel: p, YLabel: obj.Metric}}
		if !numeric {
			for v := range values {
				pc.Categories = append(pc.Categories, v)
			}
			slices.Sort(pc.Categories)
			pc.XLabel = p + " (" + strings.Join(indexed(pc.Categories), ", ") + ")"
		}
		done := series{Name: "trials", Dots: true}
		pruned := series{Name: "pruned", Dots: true}
		for _, t := range exp.Status.Trials {
			if t.Value == nil || t.Params[p] == nil {
				continue
			}
			v := formatParam(t.Params[p])
			x, err := strconv.ParseFloat(v, 64)
			if !numeric || err != nil {
				x = float64(slices.Index(pc.Categories, v))
			}
			pt := point{x, *t.Value}
			if t.Phase == schemas.TrialPruned {
				pruned.Points = append(pruned.Points, pt)
			} else {
				done.Points = append(done.Points, pt)
			}
		}
		pc.Series = []series{done}
		if len(pruned.Points) > 0 {
			pc.Series = append(pc.Series, pruned)
		}
		out = append(out, pc)
	}
	return out
}

// indexed writes categories as "0=a", "1=b"...
func indexed(cats []string) []string {
	out := make([]string, len(cats))
	for i, c := range cats {
		out[i] = fmt.Sprintf("%d=%s", i, c)
	}
	return out
}
