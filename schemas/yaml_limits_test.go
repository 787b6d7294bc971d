package schemas_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// BillionLaughs is the classic alias bomb: nine levels of nine aliases each of the
// level below, about 3 KB of text that expands to 9^9 strings.
func BillionLaughs() string {
	var b strings.Builder
	b.WriteString("apiVersion: opendlc.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: lol}\n")
	b.WriteString("a0: &a0 \"lol\"\n")
	for i := 1; i <= 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9), ", ")
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, refs)
	}
	return b.String()
}

// TestYAMLAliasExpansionIsBounded: documents within the size limit whose aliases
// expand past MaxExpandedSize, that nest too deep, or whose alias refers to itself are
// refused with ErrInvalidDocument and a message that says why; a document that uses a
// few aliases sensibly still decodes.
func TestYAMLAliasExpansionIsBounded(t *testing.T) {
	wide := "kind: TrainingJob\nx: &x \"" + strings.Repeat("y", 100_000) + "\"\nl: [" +
		strings.TrimSuffix(strings.Repeat("*x,", 100), ",") + "]\n"
	deep := "kind: TrainingJob\nx: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n"
	deepByAlias := "kind: TrainingJob\na: &a [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]\nb: [[[[[[[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]]]]]]\n"
	cycle := "kind: TrainingJob\na: &a [*a]\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"billion laughs", BillionLaughs(), "aliases expand the document to more than"},
		{"one large value aliased 100 times", wide, "aliases expand the document to more than"},
		{"40 levels of lists", deep, "nested more than 32 levels deep"},
		{"nesting through an alias", deepByAlias, "nested more than 32 levels deep"},
		{"an alias inside its own anchor", cycle, "nested more than 32 levels deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.doc) > schemas.MaxDocumentSize {
				t.Fatalf("the document is %d bytes, over the size limit", len(tc.doc))
			}
			for name, decode := range map[string]func([]byte) error{
				"Decode":            func(b []byte) error { _, err := schemas.Decode(b); return err },
				"DecodeTrainingJob": func(b []byte) error { _, err := schemas.DecodeTrainingJob(b); return err },
			} {
				err := decode([]byte(tc.doc))
				if !errors.Is(err, schemas.ErrInvalidDocument) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: got %v, want ErrInvalidDocument saying %q", name, err, tc.want)
				}
			}
		})
	}

	ok := `apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: anchors}
spec:
  framework: pytorch
  image: python:3
  command: &cmd ["python", "train.py"]
  roles:
    master: &role {replicas: 1, command: *cmd}
    worker: *role
`
	job, err := schemas.DecodeTrainingJob([]byte(ok))
	if err != nil {
		t.Fatalf("a document with a few aliases: %v", err)
	}
	if got := job.Spec.Roles["worker"].Replicas; got != 1 {
		t.Fatalf("worker replicas through the alias = %d, want 1", got)
	}
}
