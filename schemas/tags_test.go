package schemas

import (
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// structTypes returns t and every struct type reachable from its fields.
func structTypes(t reflect.Type, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t.PkgPath() != reflect.TypeFor[TrainingJob]().PkgPath() {
		return
	}
	seen[t] = true
	for field := range t.Fields() {
		structTypes(field.Type, seen)
	}
}

// checkTagPatterns checks that the patterns in the jsonschema tags of typ and of every
// struct type reachable from it are exactly want, and that each compiles and has a
// message in words.
func checkTagPatterns(t *testing.T, typ reflect.Type, want []string) {
	t.Helper()
	seen := map[reflect.Type]bool{}
	structTypes(typ, seen)
	var patterns []string
	for st := range seen {
		for i := range st.NumField() {
			if p := rulesFor(st, i).pattern; p != "" && !slices.Contains(patterns, p) {
				patterns = append(patterns, p)
			}
		}
	}
	slices.Sort(patterns)
	want = slices.Sorted(slices.Values(want))
	if diff := cmp.Diff(want, patterns); diff != "" {
		t.Errorf("patterns in jsonschema tags (-want +got):\n%s", diff)
	}
	for _, p := range patterns {
		if _, err := regexp.Compile(p); err != nil {
			t.Errorf("pattern %q: %v", p, err)
		}
		if _, ok := patternMessages[p]; !ok {
			t.Errorf("pattern %q has no entry in patternMessages", p)
		}
	}
}

// TestPatternTags checks that every pattern in a jsonschema tag compiles and has a message
// in words, so that the tags and the hand-written checks use the same expressions.
func TestPatternTags(t *testing.T) {
	checkTagPatterns(t, reflect.TypeFor[TrainingJob](), []string{checkpointURIPattern, dnsLabelPattern, envNamePattern})
}

func TestSplitTag(t *testing.T) {
	tests := map[string]struct {
		tag  string
		want []string
	}{
		"empty":          {tag: "", want: nil},
		"one":            {tag: "maxLength=5", want: []string{"maxLength=5"}},
		"several":        {tag: "minimum=1,maximum=2", want: []string{"minimum=1", "maximum=2"}},
		"escaped commas": {tag: `pattern=^a{1\,2}$,maxLength=3`, want: []string{"pattern=^a{1,2}$", "maxLength=3"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, splitTag(tt.tag)); diff != "" {
				t.Errorf("splitTag (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	tests := map[string]struct {
		a, b string
		want int
	}{
		"equal":          {a: "replicas", b: "replicas", want: 0},
		"one short":      {a: "replica", b: "replicas", want: 1},
		"missing letter": {a: "evry", b: "every", want: 1},
		"unrelated":      {a: "abc", b: "xyz", want: 3},
		"empty":          {a: "", b: "gpu", want: 3},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, editDistance(tt.a, tt.b)); diff != "" {
				t.Errorf("editDistance (-want +got):\n%s", diff)
			}
		})
	}
}
