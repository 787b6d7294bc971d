package proc

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"sync"
)

// RedactedText is what a Redactor writes in place of a secret.
const RedactedText = "[REDACTED]"

// maxPending bounds the part of a line a Redactor holds back waiting for its end.
const maxPending = 64 << 10

// Redactor writes what it is given to another writer with every secret replaced by
// RedactedText. It works on whole lines, so a secret written in pieces is still found:
// it holds back the end of a line until the line is complete (or longer than 64 KiB),
// and Flush writes what it holds.
type Redactor struct {
	mu      sync.Mutex
	w       io.Writer
	secrets []string
	pending []byte
}

// NewRedactor returns a Redactor writing to w; secrets may be added with Add.
func NewRedactor(w io.Writer, secrets ...string) *Redactor {
	r := &Redactor{w: w}
	r.Add(secrets...)
	return r
}

// Add adds secrets to redact; empty strings are ignored.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if s != "" && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	// The longest first, so that a secret containing another is replaced whole.
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
}

// Write writes the complete lines of p (and of what earlier calls held back), redacted.
func (r *Redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, p...)
	n := bytes.LastIndexByte(r.pending, '\n') + 1
	if n == 0 && len(r.pending) > maxPending {
		n = len(r.pending)
	}
	if n == 0 {
		return len(p), nil
	}
	err := r.write(r.pending[:n])
	r.pending = append(r.pending[:0], r.pending[n:]...)
	return len(p), err
}

// Flush writes what Write held back, redacted.
func (r *Redactor) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.write(r.pending)
	r.pending = r.pending[:0]
	return err
}

func (r *Redactor) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, RedactedText)
	}
	_, err := io.WriteString(r.w, s)
	return err
}
