package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/service"
)

// hostile are values no name may take: they would widen a NATS subject (*, >), split a
// subject or key (a.b, /), climb a path (..), or are not DNS labels at all.
var hostile = []string{"a.b", "*", ">", "/", "..", "ünïcödé", strings.Repeat("a", 300), "a b", "$(id)", "A", "-a", "a\x00b"}

// hostileFor are the hostile values a query parameter refuses: all of hostile, but for
// parameters whose syntax lets some of them through.
func hostileFor(param string) []string {
	switch param {
	case "type":
		return without(hostile, "a.b") // an event type is dotted
	case "phase":
		return without(hostile, "A") // a phase is a capitalized word
	case "workspace":
		return without(hostile, "*") // the admin tokens' workspace
	case "pageToken":
		// a sealed token: version 1, a MAC and Temporal's bytes in base64url, bounded
		return append(hostile, strings.Repeat("a", maxPageTokenLength+1), "eyJhIjoxfQ==", "eyJhIjoxfQ")
	case "groupByLabel":
		return without(without(hostile, "a.b"), "A") // label keys may be dotted and capitalized
	case "after":
		// an opaque cursor of base64 and separator characters, which reaches the run
		// record store only: these are of its form, and the store refuses a cursor it
		// did not make
		l := hostile
		for _, v := range []string{"A", "-a", "a.b", "/", "..", strings.Repeat("a", 300)} {
			l = without(l, v)
		}
		return append(l, strings.Repeat("a", maxCursorLength+1), "a\nb", "a%b")
	case "param":
		return append(hostile, "x=a\x00b", "x="+strings.Repeat("v", 5000), "a.b=1", "=1")
	}
	return hostile
}

func without(l []string, drop string) []string {
	var out []string
	for _, v := range l {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

// pathWith is rt's path with the path parameter which set to v (escaped) and the others
// valid.
func pathWith(rt *route, which, v string) string {
	p := rt.path
	for _, name := range pathParams(rt.path) {
		val := "x"
		switch name {
		case "ws":
			val = "alpha"
		case "kind":
			val = "TrainingJob"
		case "uid":
			val = testUID
		}
		if name == which {
			val = url.PathEscape(v)
		}
		p = strings.Replace(p, "{"+name+"}", val, 1)
	}
	return p
}

// Every path parameter of every route, and every query parameter a route declares, is
// checked as the name it stands for before the route runs: hostile values are answered
// 400 (the value refused, naming the parameter) or 404, never 500, and never reach a
// handler, which here would reach Temporal or NATS, both fakes that panic. An admin
// token sends them, so that authorization lets everything through.
func TestHostileParamsRefusedOnEveryRoute(t *testing.T) {
	tc := &fakeTemporal{}
	authn := fakeAuth{}
	admin := authn.token(t, "root", api.AllWorkspaces, api.RoleAdmin)
	h := testServerWith(tc, authn, service.Config{Rules: &notify.Store{}, Redriver: &notify.Redriver{}}).Handler()
	var paths, queries int
	for i := range routes {
		rt := &routes[i]
		for _, name := range pathParams(rt.path) {
			for _, v := range hostile {
				p := pathWith(rt, name, v)
				rec := call(h, rt.method, p, admin, bodyFor(rt, "alpha"))
				paths++
				field := name
				if v == ".." {
					field = "path" // refused before routing, where the mux would redirect
				}
				if rec.Code != http.StatusBadRequest && rec.Code != http.StatusNotFound {
					t.Errorf("%s with {%s}=%q (%s): %d %s, want 400 or 404", rt.pattern(), name, v, p, rec.Code, rec.Body)
					continue
				}
				if rec.Code == http.StatusBadRequest && !strings.Contains(rec.Body.String(), `"field":"`+field+`"`) {
					t.Errorf("%s with {%s}=%q: %s, want an error naming %s", rt.pattern(), name, v, rec.Body, field)
				}
			}
		}
		for _, q := range rt.query {
			for _, v := range hostileFor(q.name) {
				p := pathWith(rt, "", "") + "?" + url.Values{q.name: {v}}.Encode()
				rec := call(h, rt.method, p, admin, bodyFor(rt, "alpha"))
				queries++
				if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"field":"`+q.name+`"`) {
					t.Errorf("%s with %s=%q: %d %s, want 400 naming %s", rt.pattern(), q.name, v, rec.Code, rec.Body, q.name)
				}
			}
		}
	}
	t.Logf("%d hostile path values and %d hostile query values sent to %d routes", paths, queries, len(routes))
	if n := tc.starts(); n != 0 {
		t.Errorf("%d workflows started by refused requests", n)
	}
}

// Every path and query parameter of the route table has a check, so a new route
// cannot bring an unchecked one.
func TestEveryParamIsChecked(t *testing.T) {
	for _, rt := range routes {
		for _, name := range pathParams(rt.path) {
			if pathChecks[name] == nil {
				t.Errorf("%s: path parameter {%s} has no check in pathChecks", rt.pattern(), name)
			}
		}
		for _, q := range rt.query {
			if queryChecks[q.name] == nil {
				t.Errorf("%s: query parameter %s has no check in queryChecks", rt.pattern(), q.name)
			}
		}
	}
}

// Valid values pass the checks: names, the admin workspace filter, dotted event types,
// label filters, durations, pipeline parameters whose value is any text.
func TestValidParamsPass(t *testing.T) {
	for name, values := range map[string][]string{
		"workspace": {"alpha", "*"},
		"job":       {"resnet-50", strings.Repeat("a", 63)},
		"replica":   {"worker-0"},
		"type":      {"opendlc.job.phase.v1"},
		"phase":     {"Running", "Succeeded"},
		"framework": {"pytorch"},
		"label":     {"team=cv", "app.kubernetes.io/name=x", "k="},
		"since":     {"10m", "0s"},
		"follow":    {"true", "false", "1", "0"},
		"limit":     {"1", "1000"},
		"next":      {"5"},
		"pageToken": {"AQAAAAAAAAAAAAAAAAAAAAAA"}, // its form; the list checks its MAC
		"param":     {"lr=0.1", "key=a;b $(id) `x` 'q' \"d\"\nline", "x="},
	} {
		for _, v := range values {
			if msg := queryChecks[name](v); msg != "" {
				t.Errorf("%s=%q refused: %s", name, v, msg)
			}
		}
	}
}
