//go:build linux

package local

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// canScanProcs: Linux's /proc lists every process with its group, session and
// environment.
const canScanProcs = true

// procInfo is a live process.
type procInfo struct{ pid, ppid, pgid, sid int }

// procStat reads a process's parent, group and session from /proc/<pid>/stat. ok is false
// when the process is gone or has ended (a zombie runs nothing, and its environment
// reads empty).
func procStat(pid int) (procInfo, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 4 || string(f[0]) == "Z" || string(f[0]) == "X" {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	sid, err3 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil || err3 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, pgid: pgid, sid: sid}, true
}

// liveProcs lists every live process.
func liveProcs() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := procStat(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// hasMarker reports whether the environment pid was started with holds marker
// (NAME=VALUE) as an entry.
func hasMarker(pid int, marker string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false // gone, or not ours to read
	}
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if string(kv) == marker {
			return true
		}
	}
	return false
}

// supervisorAlive reports whether pid is a replica's running supervisor: the process
// exists (kill 0), has not ended, leads its own session, and carries the replica's
// marker, so that a reused pid is never mistaken for it.
func supervisorAlive(pid int, marker string) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	p, ok := procStat(pid)
	return ok && p.sid == pid && hasMarker(pid, marker)
}

// groupHasMarker reports whether a live process in process group pgid carries marker.
// While that process lives the group id cannot be reused.
func groupHasMarker(pgid int, marker string) bool {
	for _, p := range liveProcs() {
		if p.pgid == pgid && hasMarker(p.pid, marker) {
			return true
		}
	}
	return false
}

// signalIf sends sig to pid if still() holds once the process is held by a pidfd, so
// that a process that ends and whose pid is reused in between is never signalled.
func signalIf(pid int, sig syscall.Signal, still func() bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.3
		if still() {
			_ = syscall.Kill(pid, sig)
		}
		return
	}
	if err != nil {
		return // gone
	}
	defer unix.Close(fd)
	if still() {
		_ = unix.PidfdSendSignal(fd, sig, nil, 0)
	}
}

// markerDir returns the replica directory a process's marker names, or "".
func markerDir(pid int) string {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(replicaMarker+"=")); ok {
			return filepath.Clean(string(v))
		}
	}
	return ""
}

// exitNotice calls ended once process pid has exited, if still() holds once the
// process is held by a pidfd (so that a reused pid is never waited on), and reports
// whether it will. The pidfd is non-blocking and waited on by the runtime's poller
// (it becomes readable when the process exits), so a waiting notice holds no thread.
func exitNotice(pid int, still func() bool, ended func()) bool {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false // gone, or no pidfd before Linux 5.3
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	if !still() {
		f.Close()
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return false
	}
	go func() {
		defer f.Close()
		first := true
		// Read calls the function, and again each time the pidfd is readable, until it
		// returns true: the first call only registers the wait.
		_ = rc.Read(func(uintptr) bool {
			if first {
				first = false
				return false
			}
			return true
		})
		ended()
	}()
	return true
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux
// architecture the kernel exposes to user space.
const clockTicks = 100

// procUsage reads a process's CPU time in seconds (utime, stime, cutime, cstime of
// /proc/<pid>/stat: its own and that of the children it reaped) and resident set in
// bytes (/proc/<pid>/statm); ok is false when it is gone.
func procUsage(pid int) (cpu float64, rss int64, ok bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	// After "pid (comm)": state is field 3, utime 14, stime 15, cutime 16, cstime 17. A
	// zombie has ended (its memory reads 0 and its children's time is gone): not read.
	f := bytes.Fields(stat[i+1:])
	if len(f) < 15 || string(f[0]) == "Z" || string(f[0]) == "X" {
		return 0, 0, false
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		ticks += n
	}
	statm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, 0, false
	}
	g := bytes.Fields(statm)
	if len(g) < 2 {
		return 0, 0, false
	}
	pages, err := strconv.ParseInt(string(g[1]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return float64(ticks) / clockTicks, pages * int64(os.Getpagesize()), true
}
