package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
)

// stackWithWorker starts the embedded stack without its in-process worker, under dir,
// and one `dlc worker` process (dlcBin) with the local backend against it: the
// deployment shape the local benchmarks measure. stop ends both.
func stackWithWorker(ctx context.Context, dir, dlcBin string) (e *embedded.Embedded, worker *exec.Cmd, stop func(), err error) {
	e, err = embedded.Start(ctx, embedded.Config{
		Dir: filepath.Join(dir, "stack"), APIAddr: "127.0.0.1:0", NoWorker: true, Logger: itest.Logger(slog.LevelError),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	worker = exec.CommandContext(ctx, dlcBin, itest.WorkerArgs(e, "--state-dir", filepath.Join(dir, "local"), "--workdir", dir)...)
	worker.Env = itest.WorkerEnv(e)
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		e.Close()
		return nil, nil, nil, fmt.Errorf("start worker %s: %w", dlcBin, err)
	}
	return e, worker, func() {
		_ = worker.Process.Kill()
		_ = worker.Wait()
		e.Close()
	}, nil
}
