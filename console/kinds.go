package console

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/opendlc/opendlc/schemas"
)

// A kind is declared to the console once, here: its pages. The first is its list page,
// GET /ui/ws/{ws}/<plural> (schemas.Info(kind).Plural), rendered from
// templates/<plural>.html, which the navigation (templates/layout.html) links to.
// TestEveryKindHasPages ranges over schemas.Kinds() and fails for a kind missing here.

// consoleKind declares a kind to the console.
type consoleKind struct {
	kind  schemas.Kind
	pages []consolePage
}

// consolePage is one page: its ServeMux pattern and its handler, served to a
// signed-in user (Console.signedIn).
type consolePage struct {
	pattern string
	handler func(*Console) pageFunc
}

// method adapts a method expression of Console to a consolePage's handler.
func method(m func(*Console, http.ResponseWriter, *http.Request, *call) error) func(*Console) pageFunc {
	return func(c *Console) pageFunc {
		return func(w http.ResponseWriter, r *http.Request, k *call) error { return m(c, w, r, k) }
	}
}

// static adapts a handler that needs no Console.
func static(h pageFunc) func(*Console) pageFunc { return func(*Console) pageFunc { return h } }

// consoleKinds are the kinds the console shows, in the order of its navigation.
var consoleKinds = registerConsoleKinds(
	consoleKind{kind: schemas.KindTrainingJob, pages: []consolePage{
		{"GET /ui/ws/{ws}/jobs", method((*Console).jobsPage)},
		{"GET /ui/ws/{ws}/live/jobs", method((*Console).liveJobs)},
		{"GET /ui/ws/{ws}/jobs/{name}", method((*Console).jobPage)},
		{"GET /ui/ws/{ws}/jobs/{name}/charts", method((*Console).jobCharts)},
		{"GET /ui/ws/{ws}/live/jobs/{name}", method((*Console).liveJob)},
		{"GET /ui/ws/{ws}/live/jobs/{name}/logs", method((*Console).liveLogs)},
		{"POST /ui/ws/{ws}/jobs/{name}/stop", method((*Console).stopJob)},
		{"POST /ui/ws/{ws}/jobs/{name}/delete", method((*Console).deleteJob)},
		{"POST /ui/ws/{ws}/jobs/{name}/clone", method((*Console).cloneJob)},
		{"POST /ui/ws/{ws}/jobs/{name}/priority", method((*Console).setJobPriority)},
		{"GET /ui/ws/{ws}/submit", method((*Console).newJobPage)},
		{"POST /ui/ws/{ws}/submit", method((*Console).submitJob)},
	}},
	consoleKind{kind: schemas.KindExperiment, pages: []consolePage{
		{"GET /ui/ws/{ws}/experiments", method((*Console).experimentsPage)},
		{"GET /ui/ws/{ws}/experiments/{name}", method((*Console).experimentPage)},
	}},
	consoleKind{kind: schemas.KindPipeline, pages: []consolePage{
		{"GET /ui/ws/{ws}/pipelines", method((*Console).pipelinesPage)},
		{"GET /ui/ws/{ws}/pipelines/{name}", method((*Console).pipelinePage)},
	}},
	consoleKind{kind: schemas.KindSchedule, pages: []consolePage{
		{"GET /ui/ws/{ws}/schedules", method((*Console).schedulesPage)},
		{"GET /ui/ws/{ws}/schedules/{name}", method((*Console).schedulePage)},
		{"POST /ui/ws/{ws}/schedules/{name}/pause", method((*Console).pauseSchedule)},
		{"POST /ui/ws/{ws}/schedules/{name}/resume", method((*Console).resumeSchedule)},
		{"POST /ui/ws/{ws}/schedules/{name}/trigger", method((*Console).triggerSchedule)},
	}},
	consoleKind{kind: schemas.KindTrigger, pages: []consolePage{
		{"GET /ui/ws/{ws}/triggers", triggerPages.listPage},
		{"POST /ui/ws/{ws}/triggers", triggerPages.applyPage},
		{"GET /ui/ws/{ws}/triggers/{name}", method((*Console).triggerPage)},
		{"POST /ui/ws/{ws}/triggers/{name}/delete", static(triggerPages.deletePage)},
	}},
	consoleKind{kind: schemas.KindNotificationRule, pages: []consolePage{
		{"GET /ui/ws/{ws}/rules", rulePages.listPage},
		{"POST /ui/ws/{ws}/rules", rulePages.applyPage},
		{"GET /ui/ws/{ws}/rules/{name}", method((*Console).rulePage)},
		{"POST /ui/ws/{ws}/rules/{name}/delete", static(rulePages.deletePage)},
	}},
	consoleKind{kind: schemas.KindPipelineTemplate, pages: []consolePage{
		{"GET /ui/ws/{ws}/templates", templatePages.listPage},
		{"POST /ui/ws/{ws}/templates", templatePages.applyPage},
		{"GET /ui/ws/{ws}/templates/{name}", method((*Console).templatePage)},
		{"POST /ui/ws/{ws}/templates/{name}/delete", static(templatePages.deletePage)},
	}},
)

// registerConsoleKinds refuses a declaration that misses a part: the package does not
// load, and its tests say why.
func registerConsoleKinds(ks ...consoleKind) []consoleKind {
	for _, k := range ks {
		if err := k.check(); err != nil {
			panic("console: " + err.Error())
		}
	}
	return ks
}

// listPattern is the pattern of a kind's list page.
func listPattern(kind schemas.Kind) string {
	info, _ := schemas.Info(kind)
	return "GET /ui/ws/{ws}/" + info.Plural
}

// check names what a declaration misses.
func (k consoleKind) check() error {
	if _, ok := schemas.Info(k.kind); !ok {
		return fmt.Errorf("kind %s is not in schemas.Kinds() (schemas/kinds.go)", k.kind)
	}
	var errs []error
	if len(k.pages) == 0 || k.pages[0].pattern != listPattern(k.kind) {
		errs = append(errs, fmt.Errorf("kind %s declares no list page first (%s)", k.kind, listPattern(k.kind)))
	}
	for _, p := range k.pages {
		if p.handler == nil {
			errs = append(errs, fmt.Errorf("kind %s: page %s has no handler", k.kind, p.pattern))
		}
	}
	return errors.Join(errs...)
}
