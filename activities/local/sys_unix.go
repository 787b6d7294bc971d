//go:build unix && !linux

package local

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts each replica in its own process group, so that signals reach
// everything it started. Without Linux's parent-death signal, replicas outlive a worker
// that dies; they are still reported lost.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// startCmd starts cmd.
func startCmd(cmd *exec.Cmd) error { return cmd.Start() }

// reap reaps cmd's process, calls exited and kills what remains of its process group.
// Without waitid(WNOWAIT) the group is signalled after reaping, which leaves a short
// window in which the group id could be reused.
func reap(cmd *exec.Cmd, exited func()) error {
	err := cmd.Wait()
	exited()
	killGroup(cmd.Process.Pid)
	return err
}

// killGroup sends SIGKILL to process group pgid.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// groupHasMarker reports false: leftovers are only found through Linux's /proc.
func groupHasMarker(pgid int, marker string) bool { return false }
