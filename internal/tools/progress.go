package tools

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// progressEvery is how often a build in progress is reported.
const progressEvery = 10 * time.Second

type progressKey struct{}

// WithProgress returns ctx with a reporter: Ensure calls report with a line when it
// starts building a tool, every 10 s while it builds (how many packages are compiled,
// the one being compiled, the time so far), and when it is done. Without one, builds
// are quiet.
func WithProgress(ctx context.Context, report func(line string)) context.Context {
	return context.WithValue(ctx, progressKey{}, report)
}

// progressOf returns ctx's reporter, or one that does nothing.
func progressOf(ctx context.Context) func(string) {
	if r, ok := ctx.Value(progressKey{}).(func(string)); ok && r != nil {
		return r
	}
	return func(string) {}
}

// buildOutput collects the output of go install -v, which names each package as it is
// compiled, and counts those packages.
type buildOutput struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	partial  []byte
	packages int
	last     string
}

func (o *buildOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		line := string(bytes.TrimSpace(o.partial[:i]))
		o.partial = o.partial[i+1:]
		if line != "" && !bytes.HasPrefix([]byte(line), []byte("#")) && !bytes.HasPrefix([]byte(line), []byte("go: ")) {
			o.packages++
			o.last = line
		}
	}
	return len(p), nil
}

func (o *buildOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// status is "N packages compiled, now PKG".
func (o *buildOutput) status() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.packages == 0 {
		return "downloading and resolving modules"
	}
	return fmt.Sprintf("%d packages compiled, now %s", o.packages, o.last)
}

// reportWhile calls report with out's status every progressEvery until stop is closed.
func reportWhile(name string, start time.Time, out *buildOutput, report func(string), stop <-chan struct{}) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			report(fmt.Sprintf("building %s: %s (%s)", name, out.status(), time.Since(start).Round(time.Second)))
		}
	}
}
