package schemas_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/opendlc/opendlc/schemas"
)

// fuzzKind is the fuzz target of one kind's decoder and validator: arbitrary bytes
// never panic Decode, the kind's decode function or Validate; every failure is an
// ErrorList with messages or a sentinel; and a document that decodes and validates,
// written back as JSON, decodes to the same document, which validates again.
func fuzzKind[T interface {
	*D
	Validate() schemas.ErrorList
}, D any](f *testing.F, kind schemas.Kind, decode func([]byte) (T, error), seeds ...string) {
	f.Helper()
	for _, s := range kindExamples(f, kind) {
		f.Add(s)
	}
	for _, s := range append(seeds, "", "{}", "kind: "+string(kind), "a: &a [*a]", "kind: [1]\n") {
		f.Add([]byte(s))
	}
	fuzzRoundTrip(f, kind, decode, cmpopts.EquateEmpty())
}

// fuzzRoundTrip is the fuzz function of a kind's decoder and validator (see fuzzKind),
// for seeds added by the caller; opts compare a document with itself written as JSON
// and decoded again.
func fuzzRoundTrip[T interface {
	*D
	Validate() schemas.ErrorList
}, D any](f *testing.F, kind schemas.Kind, decode func([]byte) (T, error), opts ...cmp.Option) {
	f.Helper()
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := schemas.Decode(data)
		checkDecodeError(t, err)
		if err == nil {
			checkList(t, obj.Validate())
		}
		doc, err := decode(data)
		checkDecodeError(t, err)
		if err != nil {
			return
		}
		errs := doc.Validate()
		checkList(t, errs)
		if len(errs) > 0 {
			return
		}
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("marshal a valid %s: %v", kind, err)
		}
		again, err := decode(out)
		if err != nil {
			t.Fatalf("a valid %s written as JSON does not decode: %v\n%s", kind, err, out)
		}
		if diff := cmp.Diff(doc, again, opts...); diff != "" {
			t.Fatalf("a valid %s changed through JSON (-before +after):\n%s", kind, diff)
		}
		if errs := again.Validate(); len(errs) > 0 {
			t.Fatalf("a valid %s written as JSON is invalid: %v\n%s", kind, errs, out)
		}
	})
}

// kindExamples are the repository's example documents of a kind, as seeds.
func kindExamples(f *testing.F, kind schemas.Kind) [][]byte {
	f.Helper()
	var out [][]byte
	err := filepath.WalkDir(filepath.Join("..", "examples"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), "\nkind: "+string(kind)+"\n") || strings.HasPrefix(string(data), "kind: "+string(kind)+"\n") {
			out = append(out, data)
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	return out
}

func FuzzDecodeExperiment(f *testing.F) {
	fuzzKind(f, schemas.KindExperiment, schemas.DecodeExperiment,
		"kind: Experiment\nspec: {objective: {metric: loss, goal: sideways}}\n",
		`{"apiVersion":"opendlc.io/v1alpha1","kind":"Experiment","metadata":{"name":"e"},"spec":{"parameters":[{"name":"lr","type":"float","min":1,"max":0}]}}`)
}

func FuzzDecodeSchedule(f *testing.F) {
	fuzzKind(f, schemas.KindSchedule, schemas.DecodeSchedule,
		"kind: Schedule\nmetadata: {name: s}\nspec: {cron: \"61 * * * *\"}\n",
		"kind: Schedule\nmetadata: {name: s}\nspec: {cron: \"@every 1ms\", timeZone: Mars/Olympus}\n")
}

func FuzzDecodePipeline(f *testing.F) {
	fuzzKind(f, schemas.KindPipeline, schemas.DecodePipeline,
		"kind: Pipeline\nmetadata: {name: p}\nspec: {steps: [{name: a, dependsOn: [a]}]}\n",
		"kind: Pipeline\nmetadata: {name: p}\nspec: {steps: [{name: a, condition: {expression: \"${steps.b.metrics.x} >\"}}]}\n")
}

func FuzzDecodeTrigger(f *testing.F) {
	fuzzKind(f, schemas.KindTrigger, schemas.DecodeTrigger,
		"kind: Trigger\nmetadata: {name: t}\nspec: {on: {event: nope}}\n")
}

func FuzzDecodeNotificationRule(f *testing.F) {
	var seeds []string
	for _, name := range []string{"notificationrule-valid.yaml", "notificationrule-minimal.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(data))
	}
	fuzzKind(f, schemas.KindNotificationRule, schemas.DecodeNotificationRule,
		append(seeds, "kind: NotificationRule\nmetadata: {name: r}\nspec: {webhook: {url: \"ftp://x\"}}\n")...)
}

// FuzzParseCondition parses arbitrary pipeline conditions and templates. They never
// panic; a condition that parses evaluates without panicking against any values, and
// written back from its parse tree it parses to the same tree.
func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{
		"${steps.train.metrics.accuracy} > 0.9",
		"${steps.a.metrics.loss} <= ${params.maxLoss} && ${params.n} != 3 || 1 < 2",
		"${params.x} >", "> 1", "1 == 1 &&", "${unterminated", "a = b", "1e400 > -1e400",
		"NaN == NaN", "${steps..metrics.x} > 1", "${params.x} > 1 ||| 2 < 3", "",
	} {
		f.Add(s, 0.5)
	}
	f.Fuzz(func(t *testing.T, expr string, value float64) {
		_, _ = schemas.ParseTemplate(expr)
		c, err := schemas.ParseCondition(expr)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		_, _, _ = c.Eval(func(schemas.TemplateRef) (float64, error) { return value, nil })
		_ = c.Refs()
		again, err := schemas.ParseCondition(renderCondition(c))
		if err != nil {
			t.Fatalf("%q parsed, but its rendering %q does not: %v", expr, renderCondition(c), err)
		}
		if diff := cmp.Diff(renderCondition(c), renderCondition(again)); diff != "" {
			t.Fatalf("%q changed through its rendering:\n%s", expr, diff)
		}
	})
}

func renderCondition(c *schemas.ConditionExpr) string {
	terms := make([]string, len(c.Any))
	for i, term := range c.Any {
		cmps := make([]string, len(term))
		for j, cp := range term {
			cmps[j] = operand(cp.Left) + " " + cp.Op + " " + operand(cp.Right)
		}
		terms[i] = strings.Join(cmps, " && ")
	}
	return strings.Join(terms, " || ")
}

func operand(o schemas.Operand) string {
	if o.Ref != nil {
		return o.Ref.String()
	}
	return o.String()
}
