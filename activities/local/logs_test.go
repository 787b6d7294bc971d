//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/schemas"
)

// TestFollowLogsResumes follows 10,000 lines on each of stdout and stderr while they are
// written, stops part-way, resumes from the last seq seen, and checks that the two
// follows together saw every line once, in order.
func TestFollowLogsResumes(t *testing.T) {
	const n = 10000
	b := newBackend(t)
	script := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done`, n)
	g := gangOf(t, schemas.FrameworkCustom, rep("worker", 0, "sh", "-c", script))
	name := g.Replicas[0].Name
	launch(t, b, g)

	start := time.Now()
	first := firstLines(t, b, g.GangRef, name, 7000)
	rest := logs(t, b, g.GangRef, name, first[len(first)-1].Seq)
	all := append(first, rest...)
	t.Logf("followed %d lines in %v", len(all), time.Since(start))

	if len(all) != 2*n {
		t.Fatalf("got %d lines, want %d", len(all), 2*n)
	}
	next := map[string]int{"stdout": 1, "stderr": 1}
	prefix := map[string]string{"stdout": "out", "stderr": "err"}
	for i, l := range all {
		if l.Seq != int64(i+1) || l.Replica != name {
			t.Fatalf("line %d: seq %d replica %q, want seq %d replica %q", i, l.Seq, l.Replica, i+1, name)
		}
		if want := fmt.Sprintf("%s %d", prefix[l.Stream], next[l.Stream]); l.Line != want {
			t.Fatalf("seq %d on %s: %q, want %q", l.Seq, l.Stream, l.Line, want)
		}
		next[l.Stream]++
	}

	// Following again after the end, from the middle, gives exactly the tail.
	tail := logs(t, b, g.GangRef, name, 12345)
	if len(tail) != 2*n-12345 || tail[0].Seq != 12346 {
		t.Errorf("resume from 12345 after the end: %d lines starting at seq %d", len(tail), tail[0].Seq)
	}
	if diff := cmp.Diff(all[12345:], tail); diff != "" {
		t.Errorf("resumed tail differs (-first follow +resumed):\n%s", diff)
	}
}

func TestFollowLogsHonoursContext(t *testing.T) {
	b := newBackend(t)
	g := gangOf(t, schemas.FrameworkCustom, rep("worker", 0, "sleep", "600"))
	launch(t, b, g)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := b.FollowLogs(ctx, g.GangRef, g.Replicas[0].Name, 0, func(activities.LogLine) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("FollowLogs = %v, want context.DeadlineExceeded", err)
	}
	err = b.FollowLogs(context.Background(), g.GangRef, "no-such-replica", 0, func(activities.LogLine) error { return nil })
	if err == nil {
		t.Error("FollowLogs of an unknown replica succeeded")
	}
}

// TestLongLinesAreSplit checks that a line longer than 64 KiB arrives in pieces that
// add up to it, each a valid UTF-8 string, and that a last line without a newline is
// kept.
func TestLongLinesAreSplit(t *testing.T) {
	long := strings.Repeat("a", 3*maxLine+100)
	// An odd number of ASCII bytes before two-byte characters puts a character across
	// the 64 KiB boundary.
	accents := "x" + strings.Repeat("é", maxLine)
	input := long + "\n" + accents + "\nshort\n" + strings.Repeat("b", maxLine) + "\nno newline"
	file := filepath.Join(t.TempDir(), "input")
	if err := os.WriteFile(file, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	g := gangOf(t, schemas.FrameworkCustom, rep("worker", 0, "cat", file))
	launch(t, b, g)
	lines := logs(t, b, g.GangRef, g.Replicas[0].Name, 0)

	var lens []int
	var joined strings.Builder
	for _, l := range lines {
		lens = append(lens, len(l.Line))
		if !utf8.ValidString(l.Line) {
			t.Errorf("seq %d is not valid UTF-8", l.Seq)
		}
		joined.WriteString(l.Line)
	}
	wantLens := []int{maxLine, maxLine, maxLine, 100, maxLine - 1, maxLine, 2, 5, maxLine, 10}
	if diff := cmp.Diff(wantLens, lens); diff != "" {
		t.Errorf("record lengths (-want +got):\n%s", diff)
	}
	if want := strings.ReplaceAll(input, "\n", ""); joined.String() != want {
		t.Errorf("records do not add up to the input (%d bytes, want %d)", joined.Len(), len(want))
	}
}
