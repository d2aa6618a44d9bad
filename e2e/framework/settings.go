//go:build e2e

package framework

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"kjoin.dev/kjoin/e2e/lab"
)

// Settings are every knob the lab tests read from the environment, read once (docs/LAB.md
// lists them). Short runs are go test -short, not a variable.
type Settings struct {
	lab.Settings
	// Keep leaves the lab up after the tests (KJOIN_LAB_KEEP).
	Keep bool
	// Artifacts is where full logs of failed tests go (KJOIN_ARTIFACTS).
	Artifacts string

	// Bench runs make bench's rounds (KJOIN_BENCH); its samples file, command line, order
	// seed and rounds per scenario (KJOIN_BENCH_SAMPLES, _COMMAND, _SEED, _ROUNDS,
	// _CP_ROUNDS, _COST_ROUNDS).
	Bench                                       bool
	BenchSamples, BenchCommand, BenchSeed       string
	BenchRounds, BenchCPRounds, BenchCostRounds int
	// ParallelRounds and ParallelLog: TestControlPlaneParallel's rounds and its per-join
	// logs (KJOIN_PARALLEL_ROUNDS, KJOIN_PARALLEL_LOG).
	ParallelRounds int
	ParallelLog    bool
	// Storm is the bootstrap storm's sizes (KJOIN_STORM), over StormHosts with StormTokens
	// modes (KJOIN_STORM_HOSTS, KJOIN_STORM_TOKENS); StormToTheEnd runs every size even
	// after one fails, StormExplore logs more (KJOIN_STORM_TO_THE_END, KJOIN_STORM_EXPLORE).
	Storm                       string
	StormHosts, StormTokens     []string
	StormToTheEnd, StormExplore bool
	// The matrix cell this run is (make matrix): KJOIN_MATRIX_CELL, _UPGRADE_TO, _RUNTIME,
	// _KUBELET and where results go (_RESULTS).
	MatrixCell, MatrixUpgradeTo, MatrixRuntime, MatrixKubelet, MatrixResults string
	// GoldenDir is where TestWriteGoldenManifests writes (KJOIN_GOLDEN_DIR).
	GoldenDir string
}

var (
	settings     *Settings
	settingsErr  error
	settingsOnce sync.Once
)

// Env returns the settings, read from the environment on first use.
func Env() *Settings {
	settingsOnce.Do(func() { settings, settingsErr = readSettings(os.Getenv) })
	return settings
}

// readSettings reads every setting and reports all bad values at once.
func readSettings(getenv func(string) string) (*Settings, error) {
	var bad []string
	count := func(name string, def int) int {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			bad = append(bad, fmt.Sprintf("%s=%q is not a positive number", name, v))
			return def
		}
		return n
	}
	list := func(name, def string) []string {
		if v := getenv(name); v != "" {
			return strings.Split(v, ",")
		}
		return strings.Split(def, ",")
	}
	set := func(name string) bool { return getenv(name) != "" }
	s := &Settings{
		Settings: lab.SettingsFromEnv(), Keep: set("KJOIN_LAB_KEEP"), Artifacts: getenv("KJOIN_ARTIFACTS"),
		Bench: set("KJOIN_BENCH"), BenchSamples: getenv("KJOIN_BENCH_SAMPLES"), BenchCommand: getenv("KJOIN_BENCH_COMMAND"), BenchSeed: getenv("KJOIN_BENCH_SEED"),
		BenchRounds: count("KJOIN_BENCH_ROUNDS", 10), BenchCPRounds: count("KJOIN_BENCH_CP_ROUNDS", 10), BenchCostRounds: count("KJOIN_BENCH_COST_ROUNDS", 3),
		ParallelRounds: count("KJOIN_PARALLEL_ROUNDS", 2), ParallelLog: set("KJOIN_PARALLEL_LOG"),
		Storm: getenv("KJOIN_STORM"), StormHosts: list("KJOIN_STORM_HOSTS", "w9"), StormTokens: list("KJOIN_STORM_TOKENS", "shared"),
		StormToTheEnd: set("KJOIN_STORM_TO_THE_END"), StormExplore: set("KJOIN_STORM_EXPLORE"),
		MatrixCell: getenv("KJOIN_MATRIX_CELL"), MatrixUpgradeTo: getenv("KJOIN_MATRIX_UPGRADE_TO"), MatrixRuntime: getenv("KJOIN_MATRIX_RUNTIME"),
		MatrixKubelet: getenv("KJOIN_MATRIX_KUBELET"), MatrixResults: getenv("KJOIN_MATRIX_RESULTS"),
		GoldenDir: getenv("KJOIN_GOLDEN_DIR"),
	}
	if s.BenchSeed != "" {
		if _, err := strconv.ParseUint(s.BenchSeed, 10, 64); err != nil {
			bad = append(bad, fmt.Sprintf("KJOIN_BENCH_SEED=%q is not a seed (an unsigned number)", s.BenchSeed))
		}
	}
	if len(bad) > 0 {
		return s, fmt.Errorf("bad lab settings: %s", strings.Join(bad, "; "))
	}
	return s, nil
}
