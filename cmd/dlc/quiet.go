package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/opendlc/opendlc/internal/tools"
)

// runLogName is the file, in the state directory, where dlc run writes the logs of the
// embedded stack it started (without -v they stay out of the run's output).
const runLogName = "dlc-run.log"

// stackLogger is the logger of the embedded stack dlc run starts: with verbose, info and
// above on stderr; otherwise info and above in dir/dlc-run.log, so the run's output shows
// only the job. The returned function closes the file.
func stackLogger(verbose bool, dir string) (*slog.Logger, string, func(), error) {
	if verbose {
		return newLogger(true), "", func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", nil, err
	}
	path := filepath.Join(dir, runLogName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", nil, err
	}
	l := slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return l, path, func() { _ = f.Close() }, nil
}

// withBuildProgress makes the builds of the stack's servers (Temporal, the S3 gateway),
// on the first start, say on w which one is being built and how far along it is.
func withBuildProgress(ctx context.Context, w io.Writer) context.Context {
	return tools.WithProgress(ctx, func(line string) { fmt.Fprintln(w, line) })
}
