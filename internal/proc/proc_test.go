package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A secret written in pieces, across lines and at the end without a newline, never
// reaches the writer; everything else does, unchanged and in order.
func TestRedactorReplacesSecretsAcrossWrites(t *testing.T) {
	var b strings.Builder
	r := NewRedactor(&b, "hunter2", "", "nats://u:hunter2pw@h")
	for _, piece := range []string{"connect nats://u:hun", "ter2pw@h ok\nthe pass", "word is hunter2\n", "tail hunt", "er2"} {
		if n, err := r.Write([]byte(piece)); err != nil || n != len(piece) {
			t.Fatalf("Write(%q) = %d, %v", piece, n, err)
		}
	}
	if got := b.String(); strings.Contains(got, "tail") {
		t.Errorf("an incomplete line was written before Flush: %q", got)
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "connect [REDACTED] ok\nthe password is [REDACTED]\ntail [REDACTED]"
	if got := b.String(); got != want {
		t.Errorf("redacted output %q, want %q", got, want)
	}
}

// StartWith with Options.Private and Redact: the process creates its files mode 0600
// and 0700 whatever this process's umask, its command line is its own (the shell that
// set the umask exec'd it), and its log, mode 0600, holds the secret it printed only
// as [REDACTED].
func TestStartWithPrivateAndRedact(t *testing.T) {
	dir := t.TempDir()
	const secret = "s3cr3t-value-42"
	script := `cd "$DIR" && echo "key=$KEY" && mkdir d && echo x > d/f && echo "cmdline=$(tr '\0' ' ' < /proc/$$/cmdline)"`
	p, err := StartWith("test", "sh", "/bin/sh", []string{"-c", script}, filepath.Join(dir, "sh.log"),
		[]string{"KEY=" + secret, "DIR=" + dir, "PATH=/usr/bin:/bin"}, time.Second, Options{Private: true, Redact: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if p.err != nil {
		t.Fatalf("the process: %v\n%s", p.err, p.LogTail(10))
	}
	log, err := os.ReadFile(filepath.Join(dir, "sh.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), secret) || !strings.Contains(string(log), "key=[REDACTED]") {
		t.Errorf("log:\n%s", log)
	}
	if !strings.Contains(string(log), "cmdline=/bin/sh -c cd ") {
		t.Errorf("the process's command line is not its own:\n%s", log)
	}
	for path, want := range map[string]os.FileMode{"sh.log": 0o600, "d": 0o700 | os.ModeDir, "d/f": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
}
