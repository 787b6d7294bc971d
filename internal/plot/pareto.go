package plot

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// The Pareto panel of a multi-objective experiment: every completed trial placed by its
// values of the first two objectives, the trials of the status's Pareto front (computed
// over all the objectives) in red, joined in order of the first objective by the
// front's staircase when there are exactly two objectives.

// paretoPanels is how many panels the Pareto front adds: one with several objectives.
func paretoPanels(spec schemas.ExperimentSpec) int {
	if len(spec.Objectives) >= 2 {
		return 1
	}
	return 0
}

// paretoPoint is a trial with both plotted values.
type paretoPoint struct {
	id    int
	x, y  float64
	front bool
}

// drawPareto draws the Pareto panel as panel number idx of the grid.
func drawPareto(b *strings.Builder, e *api.ExperimentDetail, idx int) {
	spec, st := e.Spec.Spec, e.Status
	if paretoPanels(spec) == 0 {
		return
	}
	ox, oy := spec.Objectives[0], spec.Objectives[1]
	var pts []paretoPoint
	var xs, ys []float64
	for _, t := range st.Trials {
		x, okx := t.Values[ox.Metric]
		y, oky := t.Values[oy.Metric]
		if t.Phase != schemas.TrialCompleted || !okx || !oky || !finiteAll(x, y) {
			continue
		}
		pts = append(pts, paretoPoint{id: t.ID, x: x, y: y, front: slices.Contains(st.ParetoFront, t.ID)})
		xs, ys = append(xs, x), append(ys, y)
	}
	col, row := idx%plotCols, idx/plotCols
	title := fmt.Sprintf("Pareto front: %s (%s) vs %s (%s)", ox.Metric, ox.Direction, oy.Metric, oy.Direction)
	if n := len(spec.Objectives); n > 2 {
		title += fmt.Sprintf(", first 2 of %d", n)
	}
	p := plotPanel{b: b, x0: col * panelW, y0: 40 + row*panelH, title: title, xLabel: ox.Metric, yLabel: oy.Metric,
		xAxis: newAxis(xs, false), yAxis: newAxis(ys, false)}
	p.frame()

	// The staircase of the front, in the order of the first objective: the boundary of
	// the region the front dominates.
	var front []paretoPoint
	for _, q := range pts {
		if q.front {
			front = append(front, q)
		}
	}
	if len(spec.Objectives) == 2 && len(front) > 1 {
		slices.SortFunc(front, func(a, b paretoPoint) int {
			if a.x != b.x {
				if a.x < b.x {
					return -1
				}
				return 1
			}
			return a.id - b.id
		})
		line := []string{fmt.Sprintf("%.1f,%.1f", p.px(front[0].x), p.py(front[0].y))}
		for i := 1; i < len(front); i++ {
			prev, q := front[i-1], front[i]
			// The region the front dominates lies towards worse x: left of the points
			// when x is maximised, right of them when it is minimised.
			cx, cy := q.x, prev.y
			if ox.Direction == schemas.Maximize {
				cx, cy = prev.x, q.y
			}
			line = append(line, fmt.Sprintf("%.1f,%.1f", p.px(cx), p.py(cy)), fmt.Sprintf("%.1f,%.1f", p.px(q.x), p.py(q.y)))
		}
		fmt.Fprintf(b, `<polyline class="pareto-line" fill="none" stroke="#d62728" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(line, " "))
	}
	for _, q := range pts {
		tip := fmt.Sprintf("trial %d: %s = %.4g, %s = %.4g", q.id, ox.Metric, q.x, oy.Metric, q.y)
		if q.front {
			fmt.Fprintf(b, `<circle class="pareto front" cx="%.1f" cy="%.1f" r="5" fill="#d62728"><title>%s (Pareto front)</title></circle>`+"\n",
				p.px(q.x), p.py(q.y), xmlEscape(tip))
		} else {
			fmt.Fprintf(b, `<circle class="pareto dominated" cx="%.1f" cy="%.1f" r="4" fill="#1f77b4" fill-opacity="0.6"><title>%s</title></circle>`+"\n",
				p.px(q.x), p.py(q.y), xmlEscape(tip))
		}
	}
	x, y := p.x0+panelW-marginR-150, p.y0+16
	fmt.Fprintf(b, `<g class="legend"><circle cx="%d" cy="%d" r="5" fill="#d62728"/><text x="%d" y="%d">front</text>`, x, y, x+8, y+4)
	fmt.Fprintf(b, `<circle cx="%d" cy="%d" r="4" fill="#1f77b4" fill-opacity="0.6"/><text x="%d" y="%d">dominated</text></g>`+"\n", x+50, y, x+58, y+4)
}

func finiteAll(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}
