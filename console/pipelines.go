package console

import (
	"fmt"
	"html"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// pipelinesPage lists the workspace's pipeline runs, newest first.
func (c *Console) pipelinesPage(w http.ResponseWriter, r *http.Request, k *call) error {
	list, err := k.api.ListPipelines(r.Context(), k.ws, client.ListOptions{Phase: r.URL.Query().Get("phase"), Limit: 100})
	if err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "pipelines", "", k.page("Pipelines", "pipelines", struct {
		Items []api.PipelineSummary
		Now   time.Time
	}{list.Items, time.Now()}))
}

// pipelineStep is one row of a pipeline run's steps table.
type pipelineStep struct {
	schemas.StepStatus
	DependsOn []string
	Kind      string
}

// pipelinePage shows a pipeline run: its DAG with each step's state, and each step's
// job, condition result and outputs.
func (c *Console) pipelinePage(w http.ResponseWriter, r *http.Request, k *call) error {
	name := r.PathValue("name")
	run, err := k.api.GetPipeline(r.Context(), k.ws, name)
	if err != nil {
		return err
	}
	var steps []pipelineStep
	for _, s := range run.Spec.Spec.Steps {
		row := pipelineStep{StepStatus: schemas.StepStatus{Name: s.Name, Phase: schemas.StepPending}, DependsOn: s.DependsOn, Kind: "job"}
		if s.Condition != nil {
			row.Kind = "condition"
		}
		if st := run.Status.Step(s.Name); st != nil {
			row.StepStatus = *st
		}
		steps = append(steps, row)
	}
	return c.render(w, http.StatusOK, "pipeline", "", k.page("Pipeline "+name, "pipelines", struct {
		Run   *api.PipelineRun
		Steps []pipelineStep
		DAG   template.HTML
	}{run, steps, dagSVG(steps)}))
}

// DAG geometry, in SVG user units.
const (
	dagBoxW, dagBoxH, dagGapX, dagGapY, dagPad = 150.0, 44.0, 60.0, 16.0, 8.0
)

// stepColors colour a step's box by its phase.
var stepColors = map[schemas.StepPhase]string{
	schemas.StepPending: "#eaeef2", schemas.StepRunning: "#ddf4ff", schemas.StepSucceeded: "#dafbe1", schemas.StepFailed: "#ffebe9",
}

// dagSVG draws the steps as a left-to-right DAG: a step's column is the length of the
// longest chain of steps it depends on.
func dagSVG(steps []pipelineStep) template.HTML {
	byName := map[string]*pipelineStep{}
	for i := range steps {
		byName[steps[i].Name] = &steps[i]
	}
	depth := map[string]int{}
	var depthOf func(name string, seen map[string]bool) int
	depthOf = func(name string, seen map[string]bool) int {
		if d, ok := depth[name]; ok {
			return d
		}
		s := byName[name]
		if s == nil || seen[name] {
			return 0
		}
		seen[name] = true
		d := 0
		for _, dep := range s.DependsOn {
			d = max(d, depthOf(dep, seen)+1)
		}
		depth[name] = d
		return d
	}
	rows := map[int]int{}
	pos := map[string][2]float64{}
	maxCol, maxRow := 0, 0
	for _, s := range steps {
		col := depthOf(s.Name, map[string]bool{})
		row := rows[col]
		rows[col]++
		pos[s.Name] = [2]float64{dagPad + float64(col)*(dagBoxW+dagGapX), dagPad + float64(row)*(dagBoxH+dagGapY)}
		maxCol, maxRow = max(maxCol, col), max(maxRow, row)
	}
	w := 2*dagPad + float64(maxCol+1)*dagBoxW + float64(maxCol)*dagGapX
	h := 2*dagPad + float64(maxRow+1)*dagBoxH + float64(maxRow)*dagGapY
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="dag" id="dag" viewBox="0 0 %g %g" width="%g" role="img" aria-labelledby="dag-t"><title id="dag-t">The pipeline's steps and what each depends on</title>`, w, h, w)
	for _, s := range steps {
		to := pos[s.Name]
		for _, dep := range s.DependsOn {
			from, ok := pos[dep]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, `<line class="edge" x1="%g" y1="%g" x2="%g" y2="%g"/>`, from[0]+dagBoxW, from[1]+dagBoxH/2, to[0], to[1]+dagBoxH/2)
		}
	}
	for _, s := range steps {
		p := pos[s.Name]
		color := stepColors[s.Phase]
		if color == "" {
			color = "#fff8c5"
		}
		name, phase := html.EscapeString(s.Name), html.EscapeString(string(s.Phase))
		fmt.Fprintf(&b, `<g class="step" data-step="%s" data-phase="%s"><rect x="%g" y="%g" width="%g" height="%g" rx="6" fill="%s"/>`,
			name, phase, p[0], p[1], dagBoxW, dagBoxH, color)
		fmt.Fprintf(&b, `<text x="%g" y="%g" class="step-name">%s</text><text x="%g" y="%g">%s</text></g>`,
			p[0]+8, p[1]+18, name, p[0]+8, p[1]+35, phase)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every text is escaped above
}
