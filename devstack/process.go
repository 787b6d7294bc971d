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

// startPrivate is startProcess for a server of this user's own: every file it creates
// in the state directory is mode 0600 (directories 0700), and the secrets it is given
// in env (redact) never reach its log (proc.Options).
func startPrivate(name, bin string, args []string, logPath string, env []string, redact ...string) (*process, error) {
	return proc.StartWith("devstack", name, bin, args, logPath, env, stopTimeout, proc.Options{Private: true, Redact: redact})
}

// childEnv is this process's environment without the variables whose names start with
// one of drop, so a developer's shell cannot reconfigure a server behind our flags.
func childEnv(drop ...string) []string { return proc.ChildEnv(drop...) }
