package schemas_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

// FuzzDecodeTrainingJob feeds arbitrary bytes to Decode, DecodeTrainingJob and
// Validate. They never panic; every failure is an ErrorList with messages or one of the
// sentinel errors; and a TrainingJob that decodes and validates, written back as JSON,
// decodes to the same job and validates again.
func FuzzDecodeTrainingJob(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		if st, err := os.Stat(name); err != nil || st.IsDir() {
			continue // testdata/fuzz holds the corpora
		}
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "{}", "[]", "null", "kind: TrainingJob", "{\"kind\": 1}",
		"kind: TrainingJob\nkind: TrainingJob\n",
		"---\na: 1\n---\nb: 2\n",
		"a: &a [*a, *a]",
		`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":"a"},"spec":{"framework":"custom","command":["x"],"roles":{"w":{"replicas":1}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := schemas.Decode(data)
		checkDecodeError(t, err)
		if err == nil {
			checkList(t, obj.Validate())
		}
		job, err := schemas.DecodeTrainingJob(data)
		checkDecodeError(t, err)
		if err != nil {
			return
		}
		errs := job.Validate()
		checkList(t, errs)
		if len(errs) > 0 {
			return
		}
		out, err := json.Marshal(job)
		if err != nil {
			t.Fatalf("marshal a valid job: %v", err)
		}
		again, err := schemas.DecodeTrainingJob(out)
		if err != nil {
			t.Fatalf("a valid job written as JSON does not decode: %v\n%s", err, out)
		}
		if diff := cmp.Diff(job, again); diff != "" {
			t.Fatalf("a valid job changed through JSON (-before +after):\n%s", diff)
		}
		if errs := again.Validate(); len(errs) > 0 {
			t.Fatalf("a valid job written as JSON is invalid: %v\n%s", errs, out)
		}
	})
}

func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var list schemas.ErrorList
	switch {
	case errors.As(err, &list):
		if len(list) == 0 {
			t.Fatalf("an empty ErrorList as an error")
		}
		checkList(t, list)
	case errors.Is(err, schemas.ErrInvalidDocument), errors.Is(err, schemas.ErrDocumentTooLarge):
	default:
		t.Fatalf("decode error %T %v is neither an ErrorList nor a sentinel", err, err)
	}
}

func checkList(t *testing.T, list schemas.ErrorList) {
	t.Helper()
	for _, fe := range list {
		if fe == nil || fe.Detail == "" {
			t.Fatalf("a field error without a message in %v", list)
		}
	}
}
