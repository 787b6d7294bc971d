package schemas

import (
	"os"
	"strings"
	"testing"
)

// Every kind is registered whole: a constructor of its own kind, a noun and a plural no
// other kind uses, and a generated JSON Schema (go generate ./schemas/...).
func TestEveryKindRegistersWhole(t *testing.T) {
	nouns := map[string]Kind{}
	for _, k := range Kinds() {
		in, ok := Info(k)
		if !ok {
			t.Errorf("kind %s: Kinds lists it but Info does not know it", k)
			continue
		}
		if err := in.check(); err != nil {
			t.Errorf("%v (schemas/kinds.go)", err)
		}
		for _, w := range []string{in.Noun, in.Plural} {
			if other, taken := nouns[w]; taken {
				t.Errorf("kind %s: %q already names kind %s", k, w, other)
			}
			nouns[w] = k
		}
		file := "jsonschema/" + strings.ToLower(string(k)) + ".schema.json"
		if _, err := os.Stat(file); err != nil {
			t.Errorf("kind %s has no JSON Schema %s: run go generate ./schemas/...", k, file)
		}
		if NewObject(k) == nil {
			t.Errorf("kind %s: NewObject returns nil", k)
		}
	}
}

// A registration that misses a part is refused, naming the part.
func TestKindRegistrationRefusesMissingParts(t *testing.T) {
	whole := KindInfo{Kind: KindSchedule, Noun: "schedule", Plural: "schedules", New: func() Object { return new(Schedule) }}
	for name, c := range map[string]struct {
		change func(*KindInfo)
		want   string
	}{
		"noun":        {func(in *KindInfo) { in.Noun = "" }, "kind Schedule registers no Noun"},
		"plural":      {func(in *KindInfo) { in.Plural = "" }, "kind Schedule registers no Plural"},
		"constructor": {func(in *KindInfo) { in.New = nil }, "kind Schedule registers no New"},
		"wrong kind":  {func(in *KindInfo) { in.New = func() Object { return new(Trigger) } }, "kind Schedule: New makes a document of kind Trigger"},
	} {
		in := whole
		c.change(&in)
		if err := in.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := whole.check(); err != nil {
		t.Errorf("a whole registration is refused: %v", err)
	}
}
