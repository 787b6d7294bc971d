//go:build unix

package hpo

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time, which the benchmarks report next to
// wall time because the machines they run on are shared.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
