// Package failpoint lets a test crash a process at a named point, to show that what
// the process was doing is neither lost nor done twice when it is retried.
//
// A process arms points through the environment variable DLC_FAILPOINTS, a
// comma-separated list of names; Hit(name) on an armed point logs it and ends the
// process at once with exit status 137, as a SIGKILL would, without running deferred
// functions or flushing anything. Each armed point fires once per DLC_FAILPOINTS_DIR
// (a directory the test gives): the first Hit writes a marker file there and exits; a
// process started again with the same environment finds the marker and goes on. With
// DLC_FAILPOINTS unset, Hit does nothing.
package failpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// ExitCode is the status a process ends with at an armed point.
const ExitCode = 137

var armed = sync.OnceValue(func() []string {
	v := os.Getenv("DLC_FAILPOINTS")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
})

// Hit ends the process if name is armed and has not fired yet.
func Hit(name string) {
	if !slices.Contains(armed(), name) {
		return
	}
	if dir := os.Getenv("DLC_FAILPOINTS_DIR"); dir != "" {
		marker := filepath.Join(dir, name+".fired")
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return // fired before, or the marker cannot be written: go on
		}
		_ = f.Close()
	}
	fmt.Fprintf(os.Stderr, "failpoint %s: exiting with status %d\n", name, ExitCode)
	os.Exit(ExitCode)
}
