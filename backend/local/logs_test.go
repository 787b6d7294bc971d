//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// TestFollowLogsResumes follows 10,000 lines on each of stdout and stderr while they are
// written, stops part-way, resumes from the last seq seen, and checks that the two
// follows together saw every line once, in the order written: stdout and stderr are one
// stream.
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
	for i, l := range all {
		want := fmt.Sprintf("out %d", i/2+1)
		if i%2 == 1 {
			want = fmt.Sprintf("err %d", i/2+1)
		}
		if l.Seq != int64(i+1) || l.Replica != name || l.Stream != "stdout" || l.Line != want {
			t.Fatalf("line %d: %+v, want seq %d replica %q stream stdout line %q", i, l, i+1, name, want)
		}
	}

	// Following again after the end, from the middle, gives exactly the tail.
	tail := logs(t, b, g.GangRef, name, 12345)
	if len(tail) != 2*n-12345 || tail[0].Seq != 12346 {
		t.Errorf("resume from 12345 after the end: %d lines starting at seq %d", len(tail), tail[0].Seq)
	}
	if diff := cmp.Diff(all[12345:], tail, cmpopts.IgnoreFields(backend.LogLine{}, "Time")); diff != "" {
		t.Errorf("resumed tail differs (-first follow +resumed):\n%s", diff)
	}
}

func TestFollowLogsHonoursContext(t *testing.T) {
	b := newBackend(t)
	g := gangOf(t, schemas.FrameworkCustom, rep("worker", 0, "sleep", "600"))
	launch(t, b, g)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := b.FollowLogs(ctx, g.GangRef, g.Replicas[0].Name, 0, func(backend.LogLine) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("FollowLogs = %v, want context.DeadlineExceeded", err)
	}
	err = b.FollowLogs(context.Background(), g.GangRef, "no-such-replica", 0, func(backend.LogLine) error { return nil })
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

// TestManyLinesFromFourReplicas: 100,000 lines from each of 4 replicas are read back
// complete and in order, by a follow that stops in the middle and one that resumes
// there in another Backend (a restarted worker), while the replicas write. Resuming near
// the end of a finished log then reads at most one index interval.
func TestManyLinesFromFourReplicas(t *testing.T) {
	const n, replicas = 100000, 4
	dir := t.TempDir()
	first := newBackendOn(t, dir)
	script := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "$1 line $i"; i=$((i+1)); done`, n)
	var specs []backend.ReplicaSpec
	for i := range replicas {
		specs = append(specs, rep("worker", i, "sh", "-c", script, "sh", fmt.Sprintf("r%d", i)))
	}
	g := gangOf(t, schemas.FrameworkCustom, specs...)
	launch(t, first, g)

	start := time.Now()
	type result struct {
		name  string
		lines []backend.LogLine
		err   error
	}
	results := make(chan result, replicas)
	for _, r := range g.Replicas {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var lines []backend.LogLine
			collect := func(l backend.LogLine) error {
				lines = append(lines, l)
				if len(lines) == n/2 {
					return errEnough
				}
				return nil
			}
			err := first.FollowLogs(ctx, g.GangRef, r.Name, 0, collect)
			if !errors.Is(err, errEnough) {
				results <- result{r.Name, lines, fmt.Errorf("first follow: %w", err)}
				return
			}
			second, err := New(WithStateDir(dir))
			if err != nil {
				results <- result{r.Name, lines, err}
				return
			}
			err = second.FollowLogs(ctx, g.GangRef, r.Name, lines[len(lines)-1].Seq, collect)
			results <- result{r.Name, lines, err}
		}()
	}
	for range replicas {
		res := <-results
		if res.err != nil {
			t.Fatalf("%s: %v", res.name, res.err)
		}
		if len(res.lines) != n {
			t.Fatalf("%s: %d lines, want %d", res.name, len(res.lines), n)
		}
		idx := strings.TrimPrefix(res.name, g.Job+"-worker-")
		idx = strings.TrimSuffix(idx, "-a1")
		for i, l := range res.lines {
			if want := fmt.Sprintf("r%s line %d", idx, i+1); l.Seq != int64(i+1) || l.Line != want {
				t.Fatalf("%s line %d: seq %d %q, want seq %d %q", res.name, i, l.Seq, l.Line, i+1, want)
			}
		}
	}
	t.Logf("%d lines from %d replicas in %v", n*replicas, replicas, time.Since(start))

	// Near the end of a finished log, a resume starts from output.idx.
	name := g.Replicas[0].Name
	rdir := filepath.Join(first.gangDir(g.ID()), name)
	fi, err := os.Stat(filepath.Join(rdir, logFile))
	if err != nil {
		t.Fatal(err)
	}
	x := openIndex(filepath.Join(rdir, indexFile))
	seq, off := x.lookup(n-10, fi.Size())
	x.close()
	if want := int64((n - 10) / indexEvery * indexEvery); seq != want {
		t.Errorf("index lookup of %d: record %d, want %d", n-10, seq, want)
	}
	// Record seq+1 starts at off: "r0 line <seq+1>".
	data, err := os.ReadFile(filepath.Join(rdir, logFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("r0 line %d\n", seq+1); !strings.HasPrefix(string(data[off:]), want) {
		t.Errorf("index: record %d at offset %d reads %q, want %q", seq+1, off, data[off:off+20], want)
	}
	start = time.Now()
	tail := logs(t, newBackendOn(t, dir), g.GangRef, name, n-10)
	t.Logf("resume after line %d in a new Backend: %v", n-10, time.Since(start))
	if len(tail) != 10 || tail[0].Seq != n-9 || tail[0].Line != fmt.Sprintf("r0 line %d", n-9) {
		t.Errorf("resume after %d: %d lines, first %+v", n-10, len(tail), tail[0])
	}
}

// TestPartialLines: a line is a record once its newline is written, or once the output
// is complete; not before.
func TestPartialLines(t *testing.T) {
	rdir := t.TempDir()
	path := filepath.Join(rdir, logFile)
	var got []string
	tl := &tail{rdir: rdir, replica: "r", fn: func(l backend.LogLine) error {
		got = append(got, fmt.Sprintf("%d %s", l.Seq, l.Line))
		return nil
	}}
	defer tl.close()
	steps := []struct {
		write string
		final bool
		want  []string
	}{
		{write: "", want: nil},
		{write: "one\ntw", want: []string{"1 one"}},
		{write: "o", want: []string{"1 one"}},
		{write: "\n\nthr", want: []string{"1 one", "2 two", "3 "}},
		{write: "ee", final: true, want: []string{"1 one", "2 two", "3 ", "4 three"}},
	}
	for i, s := range steps {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s.write); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := tl.read(s.final); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestRecordsAreDeterministic: however the output is written and read (one read at the
// end, or a read after every small write, or a resume at any record), the records are
// the same: long lines split at the same places, sequence numbers the same.
func TestRecordsAreDeterministic(t *testing.T) {
	var input strings.Builder
	for i := range 3000 {
		switch {
		case i%150 == 0:
			input.WriteString(strings.Repeat("a", maxLine))
		case i%150 == 50:
			input.WriteString(strings.Repeat("é", maxLine/2+i))
		case i%150 == 100:
			input.WriteString(strings.Repeat("b", 2*maxLine+1))
		default:
			fmt.Fprintf(&input, "line %d", i)
		}
		input.WriteByte('\n')
	}
	input.WriteString("end without newline")
	data := []byte(input.String())

	// read follows the log in dir after afterSeq, reading after each write of the
	// given size.
	read := func(dir string, afterSeq int64, writeSize int) []string {
		var got []string
		tl := &tail{rdir: dir, replica: "r", afterSeq: afterSeq, fn: func(l backend.LogLine) error {
			got = append(got, fmt.Sprintf("%d %s", l.Seq, l.Line))
			return nil
		}}
		defer tl.close()
		f, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for rest := data; len(rest) > 0; {
			k := min(writeSize, len(rest))
			if _, err := f.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
			if err := tl.read(false); err != nil {
				t.Fatal(err)
			}
		}
		if err := tl.read(true); err != nil {
			t.Fatal(err)
		}
		return got
	}
	whole := read(t.TempDir(), 0, len(data))
	for i, rec := range whole {
		seq, line, _ := strings.Cut(rec, " ")
		if seq != strconv.Itoa(i+1) || len(line) > maxLine || !utf8.ValidString(line) {
			t.Fatalf("record %d: seq %s, %d bytes, valid UTF-8 %v", i, seq, len(line), utf8.ValidString(line))
		}
	}
	if diff := cmp.Diff(whole, read(t.TempDir(), 0, 4093)); diff != "" {
		t.Errorf("records read while written in small pieces differ (-at once +pieces):\n%s", diff)
	}
	// Resume everywhere, in the same directory, so output.idx is written and used.
	dir := t.TempDir()
	read(dir, 0, len(data))
	for _, after := range []int64{1, indexEvery - 1, indexEvery, indexEvery + 1, 2*indexEvery + 7, int64(len(whole)) - 1} {
		var got []string
		tl := &tail{rdir: dir, replica: "r", afterSeq: after, fn: func(l backend.LogLine) error {
			got = append(got, fmt.Sprintf("%d %s", l.Seq, l.Line))
			return nil
		}}
		if err := tl.read(true); err != nil {
			t.Fatal(err)
		}
		tl.close()
		if diff := cmp.Diff(whole[after:], got); diff != "" {
			t.Errorf("resume after %d (-want +got):\n%s", after, diff)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, indexFile)); err != nil || fi.Size() != int64(len(whole)/indexEvery*16) {
		t.Errorf("output.idx: %v, %v; want %d entries", fi, err, len(whole)/indexEvery)
	}
}
