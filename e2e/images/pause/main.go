// Command pause is the lab's pod sandbox program: it blocks until SIGTERM or SIGINT. Like the
// real pause, "-v" prints its version and exits (kubeadm upgrade's health-check Job runs it so).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause.go (kjoin lab)")
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
