package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// printed runs write into a buffer and checks that its output holds every one of
// wants; it returns the output for further checks.
func printed(t *testing.T, write func(io.Writer) error, wants ...string) string {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	return out
}
