//go:build linux

package local

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts each replica in its own process group, so that signals reach
// everything it started, and has the kernel kill it when the worker dies, so that a
// replica never outlives the only process able to observe it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// forker is one OS thread, locked and never released, on which every replica is
// started. The parent-death signal fires when the *thread* that forked the child exits,
// not the process, and the Go runtime ends a thread when a goroutine locked to it
// returns; forking from this thread makes the signal mean "the worker died".
var forker struct {
	once sync.Once
	reqs chan forkRequest
}

type forkRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// startCmd starts cmd on the forker thread.
func startCmd(cmd *exec.Cmd) error {
	forker.once.Do(func() {
		forker.reqs = make(chan forkRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: see forker
			for r := range forker.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	forker.reqs <- forkRequest{cmd: cmd, done: done}
	return <-done
}

// reap waits until cmd's process has ended, calls exited, kills what remains of its
// process group, waits for that to be gone, and reaps the process. The group is killed
// before reaping, while the zombie still holds the pid, so the group id cannot have been
// reused by then.
func reap(cmd *exec.Cmd, exited func()) error {
	pid := cmd.Process.Pid
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break // on any other error, Wait below reports what happened
		}
	}
	exited()
	killGroup(pid)
	return cmd.Wait()
}

// killGroup sends SIGKILL to process group pgid and waits, for a bounded time, until
// none of its members runs any more. They are not our children, so there is nothing to
// reap, but a caller of Stop expects them gone when it returns.
func killGroup(pgid int) {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		return // no such group
	}
	deadline := time.Now().Add(groupExitTimeout)
	for len(groupMembers(pgid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupHasMarker reports whether a live process in process group pgid carries marker
// (NAME=VALUE) in its environment. While that process lives the group id cannot be
// reused, so signalling -pgid reaches only the replica's own processes.
func groupHasMarker(pgid int, marker string) bool {
	want := append([]byte(marker), 0)
	for _, pid := range groupMembers(pgid) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			continue // gone, or not ours to read
		}
		if bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...)) {
			return true
		}
	}
	return false
}

// groupMembers lists the processes of group pgid that have not ended (zombies excluded:
// they run nothing, and init may be slow to reap them).
func groupMembers(pgid int) []int {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil
	}
	var pids []int
	for _, statPath := range stats {
		stat, err := os.ReadFile(statPath)
		if err != nil {
			continue // gone
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 3 || string(fields[0]) == "Z" || string(fields[0]) == "X" {
			continue
		}
		if pg, err := strconv.Atoi(string(fields[2])); err != nil || pg != pgid {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(statPath))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
