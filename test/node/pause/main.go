// Command pause is the real-node tier's pod sandbox ("pause") image: it holds a pod's namespaces
// open until it is told to stop, and reaps the orphans a pod's PID namespace hands it. The tier
// builds it into a local image (internal/image), since no registry is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
