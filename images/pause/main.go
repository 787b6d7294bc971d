// Command pause is the sandbox ("pause") container of kubestack's real nodes: the
// process that holds a pod's namespaces while its containers come and go. It waits for
// SIGTERM or SIGINT and reaps any child that is handed to it (as PID 1 of a pod that
// shares its process namespace). Built statically and packed into an image by
// images.Pause; nothing can be pulled from outside the machine, so the CRI's usual
// registry.k8s.io/pause is not an option.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
