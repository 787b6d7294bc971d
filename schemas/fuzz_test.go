package schemas_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
	fuzzRoundTrip(f, schemas.KindTrainingJob, schemas.DecodeTrainingJob)
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
