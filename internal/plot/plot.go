// Package plot draws an HPO experiment as an SVG image: the objective of every trial by
// trial number, with the best value so far, and the objective against each parameter of
// the search space. `dlc experiment plot` writes it; it needs nothing but the
// experiment's spec and status (api.ExperimentDetail).
package plot

import (
	"fmt"
	"math"
	"strings"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// The plot: a grid of panels, two a row.
const (
	panelW, panelH = 460, 300
	marginL        = 64
	marginR        = 16
	marginT        = 36
	marginB        = 48
	plotCols       = 2
)

// ExperimentSVG draws the objective of every trial with a value against its trial
// number (with the best so far as a line), then one panel per parameter: the objective
// against the parameter's value (on a log axis for log-scale parameters, on evenly
// spaced categories for categorical ones). Completed trials are filled dots, pruned
// trials (valued where they were stopped) hollow ones; the best trial is ringed. With
// several objectives a last panel shows the Pareto front (see drawPareto).
func ExperimentSVG(e *api.ExperimentDetail) []byte {
	spec, st := e.Spec.Spec, e.Status
	obj := spec.PrimaryObjective() // with several objectives, the plot shows the first
	panels := 1 + len(spec.SearchSpace) + paretoPanels(spec)
	rows := (panels + plotCols - 1) / plotCols
	width, height := plotCols*panelW, rows*panelH+40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	title := fmt.Sprintf("%s/%s: %s %s, %s", e.Spec.Metadata.Workspace, e.Spec.Metadata.Name,
		obj.Direction, obj.Metric, st.Phase)
	if st.BestTrial != nil && st.BestValue != nil {
		title += fmt.Sprintf("; best trial %d = %.4g", *st.BestTrial, *st.BestValue)
	}
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", 12, xmlEscape(title))

	var ys []float64
	for _, t := range st.Trials {
		if t.Value != nil && !math.IsNaN(*t.Value) && !math.IsInf(*t.Value, 0) {
			ys = append(ys, *t.Value)
		}
	}
	yAxis := newAxis(ys, false)

	// Panel 0: objective by trial.
	p := plotPanel{b: &b, x0: 0, y0: 40, title: obj.Metric + " by trial", xLabel: "trial", yLabel: obj.Metric,
		xAxis: trialAxis(len(st.Trials)), yAxis: yAxis}
	p.frame()
	// The best value so far, as steps from one completed trial to the next.
	var best *float64
	var line []string
	for _, t := range st.Trials {
		if t.Phase != schemas.TrialCompleted || t.Value == nil {
			continue
		}
		if best != nil {
			line = append(line, fmt.Sprintf("%.1f,%.1f", p.px(float64(t.ID)), p.py(*best)))
		}
		if best == nil || obj.Better(*t.Value, *best) {
			v := *t.Value
			best = &v
		}
		line = append(line, fmt.Sprintf("%.1f,%.1f", p.px(float64(t.ID)), p.py(*best)))
	}
	if best != nil && len(st.Trials) > 0 {
		line = append(line, fmt.Sprintf("%.1f,%.1f", p.px(float64(st.Trials[len(st.Trials)-1].ID)), p.py(*best)))
	}
	if len(line) > 1 {
		fmt.Fprintf(&b, `<polyline class="best" fill="none" stroke="#d62728" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(line, " "))
	}
	for _, t := range st.Trials {
		p.point(t, float64(t.ID), st.BestTrial)
	}
	p.legend()

	// One panel per parameter.
	for i, ps := range spec.SearchSpace {
		col, row := (i+1)%plotCols, (i+1)/plotCols
		p := plotPanel{b: &b, x0: col * panelW, y0: 40 + row*panelH, title: obj.Metric + " by " + ps.Name,
			xLabel: ps.Name, yLabel: obj.Metric, yAxis: yAxis}
		var vals []float64
		pos := func(v any) (float64, bool) {
			if ps.Type == schemas.ParameterCategorical {
				for k, c := range ps.Values {
					if fmt.Sprint(c.JSONValue()) == fmt.Sprint(v) {
						return float64(k), true
					}
				}
				return 0, false
			}
			f, ok := v.(float64)
			return f, ok
		}
		if ps.Type == schemas.ParameterCategorical {
			p.xAxis = categoryAxis(ps.Values)
		} else {
			if ps.Min != nil && ps.Max != nil {
				vals = append(vals, *ps.Min, *ps.Max)
			}
			for _, t := range st.Trials {
				if f, ok := pos(t.Params[ps.Name]); ok {
					vals = append(vals, f)
				}
			}
			p.xAxis = newAxis(vals, ps.Log)
		}
		p.frame()
		for _, t := range st.Trials {
			if x, ok := pos(t.Params[ps.Name]); ok {
				p.point(t, x, st.BestTrial)
			}
		}
	}
	drawPareto(&b, e, 1+len(spec.SearchSpace))
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// axis maps values to [0, 1]: linearly, logarithmically, or onto categories.
type axis struct {
	lo, hi float64
	log    bool
	ticks  []float64
	labels []string // categories' names, when set
}

func newAxis(vals []float64, log bool) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if log && v <= 0 {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if log {
		a := axis{lo: math.Log10(lo), hi: math.Log10(hi), log: true}
		if a.hi-a.lo < 1e-9 {
			a.lo, a.hi = a.lo-0.5, a.hi+0.5
		}
		for e := math.Floor(a.lo); e <= math.Ceil(a.hi); e++ {
			if e >= a.lo-1e-9 && e <= a.hi+1e-9 {
				a.ticks = append(a.ticks, math.Pow(10, e))
			}
		}
		if len(a.ticks) < 2 {
			a.ticks = []float64{math.Pow(10, a.lo), math.Pow(10, a.hi)}
		}
		return a
	}
	if hi-lo < 1e-12 {
		pad := math.Max(math.Abs(lo)*0.05, 0.5)
		lo, hi = lo-pad, hi+pad
	}
	// A little room so that no point sits on the frame.
	pad := (hi - lo) * 0.03
	lo, hi = lo-pad, hi+pad
	step := niceStep((hi - lo) / 5)
	a := axis{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step}
	for v := a.lo; v <= a.hi+step/2; v += step {
		a.ticks = append(a.ticks, math.Round(v/step)*step)
	}
	return a
}

// trialAxis spans trial numbers 0..n-1 with whole-number ticks.
func trialAxis(n int) axis {
	n = max(n, 1)
	a := axis{lo: -0.5, hi: float64(n) - 0.5}
	step := math.Max(1, math.Round(niceStep(float64(n)/8)))
	for v := 0.0; v < float64(n); v += step {
		a.ticks = append(a.ticks, v)
	}
	return a
}

func categoryAxis(values []schemas.CategoricalValue) axis {
	a := axis{lo: -0.5, hi: float64(len(values)) - 0.5}
	for i, v := range values {
		a.ticks = append(a.ticks, float64(i))
		a.labels = append(a.labels, string(v))
	}
	return a
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func (a axis) frac(v float64) float64 {
	if a.log {
		if v <= 0 {
			return 0
		}
		v = math.Log10(v)
	}
	if a.hi == a.lo {
		return 0.5
	}
	return (v - a.lo) / (a.hi - a.lo)
}

func (a axis) label(i int) string {
	if a.labels != nil {
		return a.labels[i]
	}
	return fmt.Sprintf("%.4g", a.ticks[i])
}

// plotPanel is one panel of the plot.
type plotPanel struct {
	b              *strings.Builder
	x0, y0         int
	title          string
	xLabel, yLabel string
	xAxis, yAxis   axis
}

func (p *plotPanel) px(v float64) float64 {
	return float64(p.x0+marginL) + p.xAxis.frac(v)*float64(panelW-marginL-marginR)
}

func (p *plotPanel) py(v float64) float64 {
	return float64(p.y0+panelH-marginB) - p.yAxis.frac(v)*float64(panelH-marginT-marginB)
}

// frame draws the panel's box, ticks, grid and labels.
func (p *plotPanel) frame() {
	b := p.b
	left, right := p.x0+marginL, p.x0+panelW-marginR
	top, bottom := p.y0+marginT, p.y0+panelH-marginB
	fmt.Fprintf(b, `<g class="panel"><text x="%d" y="%d" font-size="12" font-weight="bold">%s</text>`+"\n",
		left, p.y0+20, xmlEscape(p.title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", left, top, right-left, bottom-top)
	for i, t := range p.xAxis.ticks {
		x := p.px(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`, x, top, x, bottom)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, bottom+14, xmlEscape(p.xAxis.label(i)))
	}
	for i, t := range p.yAxis.ticks {
		y := p.py(t)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, left, y, right, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y+4, xmlEscape(p.yAxis.label(i)))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (left+right)/2, bottom+32, xmlEscape(p.xLabel))
	fmt.Fprintf(b, `<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle">%s</text></g>`+"\n",
		p.x0+14, (top+bottom)/2, xmlEscape(p.yLabel))
}

// point draws a trial with a value: filled when completed, hollow when pruned, ringed
// when best.
func (p *plotPanel) point(t schemas.TrialStatus, x float64, bestID *int) {
	if t.Value == nil || math.IsNaN(*t.Value) || math.IsInf(*t.Value, 0) {
		return
	}
	cx, cy := p.px(x), p.py(*t.Value)
	tip := fmt.Sprintf("trial %d (%s): %.4g", t.ID, t.Phase, *t.Value)
	if t.Phase == schemas.TrialCompleted {
		fmt.Fprintf(p.b, `<circle class="trial completed" cx="%.1f" cy="%.1f" r="4" fill="#1f77b4"><title>%s</title></circle>`+"\n", cx, cy, xmlEscape(tip))
	} else {
		fmt.Fprintf(p.b, `<circle class="trial pruned" cx="%.1f" cy="%.1f" r="4" fill="white" stroke="#ff7f0e" stroke-width="1.5"><title>%s</title></circle>`+"\n", cx, cy, xmlEscape(tip))
	}
	if bestID != nil && *bestID == t.ID {
		fmt.Fprintf(p.b, `<circle class="best-trial" cx="%.1f" cy="%.1f" r="8" fill="none" stroke="#d62728" stroke-width="1.5"/>`+"\n", cx, cy)
	}
}

// legend is one line in the panel's header, right of its title.
func (p *plotPanel) legend() {
	x, y := p.x0+panelW-marginR-215, p.y0+16
	fmt.Fprintf(p.b, `<g class="legend"><circle cx="%d" cy="%d" r="4" fill="#1f77b4"/><text x="%d" y="%d">completed</text>`,
		x, y, x+8, y+4)
	fmt.Fprintf(p.b, `<circle cx="%d" cy="%d" r="4" fill="white" stroke="#ff7f0e" stroke-width="1.5"/><text x="%d" y="%d">pruned</text>`,
		x+75, y, x+83, y+4)
	fmt.Fprintf(p.b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#d62728" stroke-width="1.5"/><text x="%d" y="%d">best so far</text></g>`+"\n",
		x+130, y, x+142, y, x+146, y+4)
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
