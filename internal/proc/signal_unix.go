//go:build unix

package proc

import "syscall"

// signalGroup signals the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}
