package lab

import "os"

// Settings are the lab's own knobs from the environment (docs/LAB.md lists them); the test
// framework and bin/lab read them here, once each.
type Settings struct {
	// Root is where the lab keeps its state (KJOIN_LAB_ROOT; "" is the default).
	Root string
	// Bin is the kjoin binary put on every host (KJOIN_BIN; "" puts none).
	Bin string
	// Components is the directory of the Kubernetes and etcd programs (KJOIN_COMPONENTS).
	Components string
	// Family is the lab's address family (KJOIN_LAB_FAMILY: "" for IPv4, "ipv6").
	Family string
	// Cache holds the component, image and root filesystem caches (KJOIN_CACHE).
	Cache string
}

// SettingsFromEnv reads the lab's settings from the environment.
func SettingsFromEnv() Settings {
	s := Settings{Root: os.Getenv("KJOIN_LAB_ROOT"), Bin: os.Getenv("KJOIN_BIN"), Components: os.Getenv("KJOIN_COMPONENTS"),
		Family: os.Getenv("KJOIN_LAB_FAMILY"), Cache: os.Getenv("KJOIN_CACHE")}
	if s.Cache == "" {
		s.Cache = "/var/cache/kjoin"
	}
	return s
}

// Options are the lab options these settings give, with log as its progress output.
func (s Settings) Options(log func(string, ...any)) Options {
	extra := map[string]string{}
	if s.Bin != "" {
		extra["kjoin"] = s.Bin
	}
	return Options{Root: s.Root, BinDir: s.Components, ExtraBins: extra, Family: s.Family, Log: log}
}
