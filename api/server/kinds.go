package server

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/opendlc/opendlc/schemas"
)

// A kind registers with the API once, here: its routes, which the route table serves,
// authorizes, audits and documents (routes.go), and which of them takes the kind's
// document. /v1/validate and the document route both decode and validate with the
// schemas package (schemas.DecodeValid), so what one accepts the other does.
// TestEveryKindHasRoutes ranges over schemas.Kinds() and fails for a kind missing here.

// kindAPI is a kind's registration with the API.
type kindAPI struct {
	kind schemas.Kind
	// routes are the kind's operations.
	routes []route
	// document is the id of the route that takes the kind's document (submit, create,
	// apply or run): its request body is the kind's schema.
	document string
}

// apiKinds are the kinds the API serves, in the order the OpenAPI document lists
// their tags.
var apiKinds = registerAPIKinds(
	kindAPI{kind: schemas.KindTrainingJob, routes: jobRoutes, document: "submitJob"},
	kindAPI{kind: schemas.KindNotificationRule, routes: ruleRoutes, document: "applyRule"},
	kindAPI{kind: schemas.KindPipeline, routes: pipelineRoutes, document: "runPipeline"},
	kindAPI{kind: schemas.KindTrigger, routes: triggerRoutes, document: "applyTrigger"},
	kindAPI{kind: schemas.KindPipelineTemplate, routes: templateRoutes, document: "applyTemplate"},
	kindAPI{kind: schemas.KindExperiment, routes: slices.Concat(trialRoutes, experimentRoutes), document: "createExperiment"},
	kindAPI{kind: schemas.KindSchedule, routes: scheduleRoutes, document: "createSchedule"},
)

// registerAPIKinds refuses a registration that misses a part: the package does not
// load, and its tests say why.
func registerAPIKinds(ks ...kindAPI) []kindAPI {
	for _, k := range ks {
		if err := k.check(); err != nil {
			panic("api/server: " + err.Error())
		}
	}
	return ks
}

// check names what a registration misses.
func (k kindAPI) check() error {
	var errs []error
	if len(k.routes) == 0 {
		errs = append(errs, fmt.Errorf("kind %s registers no routes", k.kind))
	}
	if k.document == "" {
		errs = append(errs, fmt.Errorf("kind %s registers no document route (the one that takes its document)", k.kind))
	} else if rt := k.route(k.document); rt == nil {
		errs = append(errs, fmt.Errorf("kind %s: its document route %s is not one of its routes", k.kind, k.document))
	} else if want := reflect.TypeOf(schemas.NewObject(k.kind)); want == nil {
		errs = append(errs, fmt.Errorf("kind %s is no kind of schemas.Kinds()", k.kind))
	} else if rt.request == nil || reflect.PointerTo(reflect.TypeOf(rt.request.v)) != want {
		errs = append(errs, fmt.Errorf("kind %s: its document route %s does not take a %s document", k.kind, k.document, k.kind))
	}
	for _, rt := range k.routes {
		if rt.object == "" {
			errs = append(errs, fmt.Errorf("kind %s: route %s names no object (what {name} is)", k.kind, rt.pattern()))
		}
	}
	return errors.Join(errs...)
}

// route is the kind's route with the id.
func (k kindAPI) route(id string) *route {
	for i := range k.routes {
		if k.routes[i].id == id {
			return &k.routes[i]
		}
	}
	return nil
}

// tableRoutes assembles the route table: the system routes, the first kind's (jobs),
// the cluster routes, then the other kinds' in registration order: the order the
// OpenAPI document lists their tags in.
func tableRoutes() []route {
	out := slices.Clone(systemRoutes)
	for i, k := range apiKinds {
		out = append(out, k.routes...)
		if i == 0 {
			out = append(out, clusterRoutes...)
			out = append(out, historyRoutes...)
		}
	}
	return out
}
