package devstack

import (
	"time"

	"github.com/opendlc/opendlc/internal/proc"
)

// stopTimeout is how long Close waits after SIGTERM before it sends SIGKILL. The
// Temporal dev server's orderly shutdown (its services one by one, then SQLite) takes
// a few seconds, and more than 5 on a loaded two-core machine.
const stopTimeout = 15 * time.Second

type process = proc.Process

// startProcess runs a server binary as a child process (see internal/proc).
func startProcess(name, bin string, args []string, logPath string, env []string) (*process, error) {
	return proc.Start("devstack", name, bin, args, logPath, env, stopTimeout)
}

// childEnv is this process's environment without the variables whose names start with
// one of drop, so a developer's shell cannot reconfigure a server behind our flags.
func childEnv(drop ...string) []string { return proc.ChildEnv(drop...) }
