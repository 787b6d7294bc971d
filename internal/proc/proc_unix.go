//go:build unix && !linux

package proc

import "syscall"

// sysProcAttr puts the child in its own process group. Only Linux can also
// tie the child's life to ours (Pdeathsig).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
