package console

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// experimentsPage lists the workspace's experiments, newest first.
func (c *Console) experimentsPage(w http.ResponseWriter, r *http.Request, k *call) error {
	list, err := k.api.ListExperiments(r.Context(), k.ws, client.ListOptions{Phase: r.URL.Query().Get("phase"), Limit: 100})
	if err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "experiments", "", k.page("Experiments", "experiments", struct {
		Items []api.ExperimentSummary
		Now   time.Time
	}{list.Items, time.Now()}))
}

// experimentData is the experiment page's.
type experimentData struct {
	Exp *api.ExperimentDetail
	// Params are the search space's parameter names, the trials table's columns.
	Params []string
	Trials []trialRow
	Chart  chart
	// ParamCharts are the objective by each parameter.
	ParamCharts []paramChart
	Best        []paramValue
}

// trialRow is one row of the trials table.
type trialRow struct {
	schemas.TrialStatus
	Best bool
	// Cells are the trial's parameter values, in Params order.
	Cells []string
}

// paramValue is one best parameter.
type paramValue struct{ Name, Value string }

// experimentPage shows an experiment: its trials (sortable by the page's script), the
// objective by trial with the best so far, and the best parameters.
func (c *Console) experimentPage(w http.ResponseWriter, r *http.Request, k *call) error {
	name := r.PathValue("name")
	exp, err := k.api.GetExperiment(r.Context(), k.ws, name)
	if err != nil {
		return err
	}
	d := experimentData{Exp: exp}
	for _, p := range exp.Spec.Spec.SearchSpace {
		d.Params = append(d.Params, p.Name)
	}
	for _, t := range exp.Status.Trials {
		row := trialRow{TrialStatus: t, Best: exp.Status.BestTrial != nil && *exp.Status.BestTrial == t.ID}
		for _, p := range d.Params {
			row.Cells = append(row.Cells, formatParam(t.Params[p]))
		}
		d.Trials = append(d.Trials, row)
	}
	d.Chart = objectiveChart(exp)
	d.ParamCharts = paramCharts(exp, d.Params)
	for _, p := range d.Params {
		if v, ok := exp.Status.BestParams[p]; ok {
			d.Best = append(d.Best, paramValue{p, formatParam(v)})
		}
	}
	return c.render(w, http.StatusOK, "experiment", "", k.page("Experiment "+name, "experiments", d))
}

// formatParam writes a parameter value briefly.
func formatParam(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return fmt.Sprintf("%.6g", x)
	default:
		return fmt.Sprint(x)
	}
}

// objectiveChart is the objective of each trial that reported one, by trial number, and
// the best so far (lowest when minimizing, highest when maximizing).
func objectiveChart(exp *api.ExperimentDetail) chart {
	obj := exp.Spec.Spec.Objective
	trials := slices.Clone(exp.Status.Trials)
	slices.SortFunc(trials, func(a, b schemas.TrialStatus) int { return a.ID - b.ID })
	values := series{Name: obj.Metric, Dots: true}
	best := series{Name: "best so far", Step: true}
	for _, t := range trials {
		if t.Value == nil {
			continue
		}
		x, v := float64(t.ID), *t.Value
		values.Points = append(values.Points, point{x, v})
		if n := len(best.Points); n > 0 {
			prev := best.Points[n-1].Y
			if (obj.Direction == schemas.Maximize && prev > v) || (obj.Direction != schemas.Maximize && prev < v) {
				v = prev
			}
		}
		best.Points = append(best.Points, point{x, v})
	}
	return chart{ID: "objective", Title: fmt.Sprintf("%s (%s) by trial", obj.Metric, obj.Direction),
		XLabel: "trial", YLabel: obj.Metric, Series: []series{values, best}}
}
