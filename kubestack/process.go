package kubestack

import (
	"time"

	"github.com/opendlc/opendlc/internal/proc"
)

// stopTimeout is how long Close waits after SIGTERM before it sends SIGKILL.
const stopTimeout = 10 * time.Second

type process = proc.Process

// startProcess runs a component as a child process (see internal/proc). KUBECONFIG and
// friends from a developer's shell must not redirect a component: everything it needs
// is in its flags.
func startProcess(name, bin string, args []string, logPath string, extraEnv ...string) (*process, error) {
	return proc.Start("kubestack", name, bin, args, logPath, append(proc.ChildEnv("KUBECONFIG=", "ETCD_", "KWOK_"), extraEnv...), stopTimeout)
}
