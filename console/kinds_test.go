package console

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// Every kind is declared to the console (consoleKinds, kinds.go): its pages are
// served, its list page has its template, and the navigation links to it.
func TestEveryKindHasPages(t *testing.T) {
	c := New(nil, Options{})
	layout, err := templateFS.ReadFile("templates/layout.html")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[schemas.Kind]consoleKind{}
	for _, k := range consoleKinds {
		if _, dup := declared[k.kind]; dup {
			t.Errorf("kind %s is declared twice in consoleKinds (console/kinds.go)", k.kind)
		}
		declared[k.kind] = k
	}
	for _, kind := range schemas.Kinds() {
		k, ok := declared[kind]
		if !ok {
			t.Errorf("kind %s has no console pages: declare them in consoleKinds (console/kinds.go)", kind)
			continue
		}
		if err := k.check(); err != nil {
			t.Errorf("%v (console/kinds.go)", err)
			continue
		}
		info, _ := schemas.Info(kind)
		for _, p := range k.pages {
			method, path, _ := strings.Cut(p.pattern, " ")
			path = strings.NewReplacer("{ws}", "a", "{name}", "x").Replace(path)
			if _, served := c.mux.Handler(httptest.NewRequest(method, path, nil)); served != p.pattern {
				t.Errorf("kind %s: %s %s is served as %q, want %q", kind, method, path, served, p.pattern)
			}
		}
		if _, ok := c.pages[info.Plural]; !ok {
			t.Errorf("kind %s: its list page has no template templates/%s.html", kind, info.Plural)
		}
		if link := `wsPath .WS "` + info.Plural + `"`; !strings.Contains(string(layout), link) {
			t.Errorf("kind %s: the navigation (templates/layout.html) has no link {{%s}}", kind, link)
		}
	}
}

// A declaration that misses a part is refused, naming the part.
func TestConsoleKindRefusesMissingParts(t *testing.T) {
	list := consolePage{"GET /ui/ws/{ws}/schedules", method((*Console).schedulesPage)}
	for name, c := range map[string]struct {
		k    consoleKind
		want string
	}{
		"list page": {consoleKind{kind: schemas.KindSchedule}, "kind Schedule declares no list page first (GET /ui/ws/{ws}/schedules)"},
		"handler": {consoleKind{kind: schemas.KindSchedule, pages: []consolePage{list, {pattern: "GET /ui/ws/{ws}/schedules/{name}"}}},
			"kind Schedule: page GET /ui/ws/{ws}/schedules/{name} has no handler"},
	} {
		if err := c.k.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if !slices.ContainsFunc(consoleKinds, func(k consoleKind) bool { return k.kind == schemas.KindSchedule }) {
		t.Error("no Schedule pages")
	}
}
