package console

import (
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
)

// point is one value of a series.
type point struct{ X, Y float64 }

// series is one line of a chart.
type series struct {
	Name   string
	Points []point
	// Step draws the line as steps (a best-so-far curve) rather than straight segments.
	Step bool
	// Dots draws each point as a dot, without a line.
	Dots bool
}

// chart is one chart: a title, axis names and its series, rendered as inline SVG.
type chart struct {
	ID, Title, XLabel, YLabel string
	Series                    []series
}

// stepKey is the metric that numbers a report; without it a report is numbered by its
// position.
const stepKey = "step"

// byReplica is one chart's lines, by replica.
type byReplica map[string]*series

// add appends a point to replica's line.
func (m byReplica) add(replica string, x, y float64) {
	s := m[replica]
	if s == nil {
		s = &series{Name: replica}
		m[replica] = s
	}
	s.Points = append(s.Points, point{x, y})
}

// chart is the chart of these lines, in replica order.
func (m byReplica) chart(id, title, xLabel, yLabel string) chart {
	ch := chart{ID: id, Title: title, XLabel: xLabel, YLabel: yLabel}
	for _, rep := range slices.Sorted(maps.Keys(m)) {
		ch.Series = append(ch.Series, *m[rep])
	}
	return ch
}

// metricCharts reads the job's run's events once and makes one chart per metric it
// reported, by step, one line per replica; then, from its resource samples
// (docs/metrics.md, "Resource use"), a chart of CPU, of memory and, when a sample read
// GPUs, of their utilization, by seconds since the first sample.
func (c *Console) metricCharts(r *http.Request, k *call, job *api.Job) ([]chart, error) {
	since := time.Hour
	if st := job.Status.StartTime; st != nil {
		since = time.Since(*st) + time.Minute
	} else if len(job.Status.Timeline) > 0 {
		since = time.Since(job.Status.Timeline[0].Time) + time.Minute
	}
	byMetric := map[string]byReplica{}
	count := map[string]int{}
	cpu, mem, gpu := byReplica{}, byReplica{}, byReplica{}
	var firstSample time.Time
	err := k.api.Events(r.Context(), k.ws, client.EventOptions{Job: job.Spec.Metadata.Name, Since: since},
		func(ev events.Event) error {
			switch ev.Type {
			case events.TypeJobMetric:
				var d events.MetricData
				if json.Unmarshal(ev.Data, &d) != nil || d.UID != job.UID {
					return nil //nolint:nilerr // unreadable or another run's: skip it
				}
				count[d.Replica]++
				x, ok := d.Values[stepKey]
				if !ok {
					x = float64(count[d.Replica])
				}
				for name, v := range d.Values {
					if name == stepKey || math.IsNaN(v) || math.IsInf(v, 0) {
						continue
					}
					if byMetric[name] == nil {
						byMetric[name] = byReplica{}
					}
					byMetric[name].add(d.Replica, x, v)
				}
			case events.TypeJobResources:
				var d events.ResourceData
				if json.Unmarshal(ev.Data, &d) != nil || d.UID != job.UID {
					return nil //nolint:nilerr // unreadable or another run's: skip it
				}
				if firstSample.IsZero() {
					firstSample = ev.Time
				}
				x := ev.Time.Sub(firstSample).Seconds()
				m := d.ResourceMetrics()
				cpu.add(d.Replica, x, m[events.ResourceCPU])
				mem.add(d.Replica, x, m[events.ResourceMemoryBytes]/(1<<20))
				if u, ok := m[events.ResourceGPUUtilization]; ok {
					gpu.add(d.Replica, x, u)
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	charts := make([]chart, 0, len(byMetric)+3)
	for _, n := range slices.Sorted(maps.Keys(byMetric)) {
		charts = append(charts, byMetric[n].chart("metric-"+n, n, stepKey, n))
	}
	for _, c := range []struct {
		id, title, unit string
		m               byReplica
	}{
		{"resource-cpu", "CPU", "cores", cpu},
		{"resource-memory", "memory", "MiB", mem},
		{"resource-gpu-utilization", "GPU utilization", "percent", gpu},
	} {
		if len(c.m) > 0 {
			charts = append(charts, c.m.chart(c.id, c.title, "seconds", c.unit))
		}
	}
	return charts, nil
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH             = 560.0, 240.0
	padL, padR, padT, padB     = 64.0, 16.0, 16.0, 40.0
	plotW, plotH               = chartW - padL - padR, chartH - padT - padB
	legendDx, legendDy         = 8.0, 14.0
	maxPointsPerSeriesRendered = 2000
)

// seriesColors tell series apart; they are also named in the legend.
var seriesColors = []string{"#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bc4c00", "#0969da", "#57606a"}

// svg renders a chart as inline SVG with a title and a description, so that screen
// readers name it.
func (ch chart) SVG() template.HTML {
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	n := 0
	for _, s := range ch.Series {
		for _, p := range s.Points {
			minX, maxX = math.Min(minX, p.X), math.Max(maxX, p.X)
			minY, maxY = math.Min(minY, p.Y), math.Max(maxY, p.Y)
			n++
		}
	}
	var b strings.Builder
	title := html.EscapeString(ch.Title)
	fmt.Fprintf(&b, `<svg class="chart" id="%s" viewBox="0 0 %g %g" role="img" aria-labelledby="%s-t %s-d" data-points="%d">`,
		html.EscapeString(ch.ID), chartW, chartH, html.EscapeString(ch.ID), html.EscapeString(ch.ID), n)
	fmt.Fprintf(&b, `<title id="%s-t">%s</title>`, html.EscapeString(ch.ID), title)
	if n == 0 {
		fmt.Fprintf(&b, `<desc id="%s-d">no values yet</desc><text x="%g" y="%g" class="empty">no values yet</text></svg>`,
			html.EscapeString(ch.ID), chartW/2, chartH/2)
		return template.HTML(b.String()) //nolint:gosec // every text is escaped above
	}
	if maxX == minX {
		minX, maxX = minX-1, maxX+1
	}
	if maxY == minY {
		minY, maxY = minY-1, maxY+1
	}
	fmt.Fprintf(&b, `<desc id="%s-d">%s by %s: %d values from %s to %s</desc>`, html.EscapeString(ch.ID), title,
		html.EscapeString(ch.XLabel), n, num(minY), num(maxY))
	sx := func(x float64) float64 { return padL + (x-minX)/(maxX-minX)*plotW }
	sy := func(y float64) float64 { return padT + (1-(y-minY)/(maxY-minY))*plotH }
	// Axes, their extreme values and names.
	fmt.Fprintf(&b, `<g class="axis"><line x1="%g" y1="%g" x2="%g" y2="%g"/><line x1="%g" y1="%g" x2="%g" y2="%g"/>`,
		padL, padT, padL, padT+plotH, padL, padT+plotH, padL+plotW, padT+plotH)
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="end">%s</text><text x="%g" y="%g" text-anchor="end">%s</text>`,
		padL-4, padT+8, num(maxY), padL-4, padT+plotH, num(minY))
	fmt.Fprintf(&b, `<text x="%g" y="%g">%s</text><text x="%g" y="%g" text-anchor="end">%s</text>`,
		padL, padT+plotH+16, num(minX), padL+plotW, padT+plotH+16, num(maxX))
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%s</text></g>`, padL+plotW/2, chartH-4, html.EscapeString(ch.XLabel))
	for i, s := range ch.Series {
		color := seriesColors[i%len(seriesColors)]
		pts := s.Points
		if len(pts) > maxPointsPerSeriesRendered {
			pts = thin(pts, maxPointsPerSeriesRendered)
		}
		fmt.Fprintf(&b, `<g class="series" data-series="%s">`, html.EscapeString(s.Name))
		if s.Dots {
			for _, p := range pts {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, sx(p.X), sy(p.Y), color)
			}
		} else {
			b.WriteString(`<polyline fill="none" stroke-width="1.5" stroke="` + color + `" points="`)
			for j, p := range pts {
				if s.Step && j > 0 {
					fmt.Fprintf(&b, "%.1f,%.1f ", sx(p.X), sy(pts[j-1].Y))
				}
				fmt.Fprintf(&b, "%.1f,%.1f ", sx(p.X), sy(p.Y))
			}
			b.WriteString(`"/>`)
		}
		fmt.Fprintf(&b, `<text x="%g" y="%g" fill="%s">%s</text></g>`, padL+plotW-legendDx,
			padT+legendDy*float64(i+1), color, html.EscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every text is escaped above
}

// thin keeps about n points of pts, evenly spaced, and the last.
func thin(pts []point, n int) []point {
	out := make([]point, 0, n+1)
	step := float64(len(pts)) / float64(n)
	for i := 0.0; int(i) < len(pts); i += step {
		out = append(out, pts[int(i)])
	}
	if out[len(out)-1] != pts[len(pts)-1] {
		out = append(out, pts[len(pts)-1])
	}
	return out
}

// num formats an axis value briefly.
func num(v float64) string {
	return fmt.Sprintf("%.4g", v)
}
