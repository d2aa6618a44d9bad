//go:build kjoin_fault

package app

import (
	"os"
	"strconv"
	"syscall"
	"time"

	"kjoin.dev/kjoin/atomicfile"
)

// faultHook is the lab's fault injection; only binaries built with -tags kjoin_fault have it.
//
//   - KJOIN_FAULT_KILL_AFTER=<phase>: the process kills itself like kill -9 after that phase.
//   - KJOIN_FAULT_PAUSE_AT=<point> with KJOIN_FAULT_MARK=<file>: at that point inside a phase
//     (host.Env.At) the process writes its pid to the file and waits until the file is
//     removed, so a test can observe the join there and kill it, or disturb the cluster and
//     let it go on.
func faultHook(getenv func(string) string) (afterPhase, at func(string)) {
	if stop := getenv("KJOIN_FAULT_KILL_AFTER"); stop != "" {
		afterPhase = func(name string) {
			if name == stop {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	}
	point, mark := getenv("KJOIN_FAULT_PAUSE_AT"), getenv("KJOIN_FAULT_MARK")
	if point != "" && mark != "" {
		at = func(name string) {
			if name != point {
				return
			}
			if err := atomicfile.Write(mark, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644, 0o755); err != nil {
				return
			}
			for {
				if _, err := os.Stat(mark); os.IsNotExist(err) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return afterPhase, at
}
