//go:build unix && !linux

package local

import "syscall"

// canScanProcs: without Linux's /proc, processes cannot be listed with their
// environment. Replicas are still supervised and re-adopted, but a supervisor is
// recognised by its pid alone (a reused pid can be mistaken for it), and Stop reaches
// only the supervisor's process group.
const canScanProcs = false

type procInfo struct{ pid, ppid, pgid, sid int }

func procStat(pid int) (procInfo, bool) { return procInfo{}, false }

func liveProcs() []procInfo { return nil }

func hasMarker(pid int, marker string) bool { return false }

func markerDir(pid int) string { return "" }

// supervisorAlive reports whether pid exists.
func supervisorAlive(pid int, marker string) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

func groupHasMarker(pgid int, marker string) bool { return false }

// signalIf sends sig to pid if still() holds.
func signalIf(pid int, sig syscall.Signal, still func() bool) {
	if still() {
		_ = syscall.Kill(pid, sig)
	}
}

// exitNotice reports false: without pidfds an adopted supervisor's end is observed.
func exitNotice(pid int, still func() bool, ended func()) bool { return false }

func procUsage(pid int) (cpu float64, rss int64, ok bool) { return 0, 0, false }
