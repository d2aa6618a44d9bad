//go:build !kjoin_fault

package app

// faultHook is the lab's fault injection; release builds have none (build tag kjoin_fault).
func faultHook(func(string) string) (afterPhase, at func(string)) { return nil, nil }
