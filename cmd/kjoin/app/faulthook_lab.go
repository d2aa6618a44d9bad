//go:build kjoin_fault

package app

import (
	"os"
	"syscall"
)

// faultHook kills the process like kill -9 after the phase named by KJOIN_FAULT_KILL_AFTER,
// for the lab's resume tests. Only binaries built with -tags kjoin_fault have it.
func faultHook(getenv func(string) string) func(string) {
	stop := getenv("KJOIN_FAULT_KILL_AFTER")
	if stop == "" {
		return nil
	}
	return func(name string) {
		if name == stop {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
}
