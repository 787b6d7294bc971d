package proc

import "syscall"

// sysProcAttr puts the child in its own process group (so a Ctrl-C meant for
// us does not reach it first, and stop can signal everything it spawned) and
// asks the kernel to kill it if we die without calling Close. (Linux sends
// the signal when the OS thread that started the child exits; the Go runtime
// only ends threads that a goroutine left locked, which this package never
// does.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
