package main

import (
	"fmt"
	"strings"
)

// figure is one headline figure of a run: what issue 35 set out to move.
type figure struct {
	name string
	of   func([]sample) string
}

// headline are the figures compared with an earlier run, each computed alike from either run's
// samples ("–" where a run did not measure it).
var headline = []figure{
	{"worker `kjoin join`: wall (median)", medianOf("worker", "kjoin join", wall)},
	{"worker `kubeadm join`: wall (median)", medianOf("worker", "kubeadm join", wall)},
	{"worker, kjoin / kubeadm wall (medians, one run)", toolRatio("worker", "kjoin join", "kubeadm join")},
	{"worker `kjoin join`: Node GETs until Ready (median)", callMedian("kjoin join", "get nodes")},
	{"worker `kubeadm join`: Node GETs until Ready (median)", callMedian("kubeadm join", "get nodes")},
	{"control plane `kjoin`: wall (median)", medianOf("control-plane", "kjoin join --control-plane", wall)},
	{"control plane `kubeadm`: wall (median)", medianOf("control-plane", "kubeadm join --control-plane", wall)},
	{"control plane, kjoin / kubeadm wall (medians, one run)", toolRatio("control-plane", "kjoin join --control-plane", "kubeadm join --control-plane")},
	{"control plane `kjoin`: learner restarted", restarts("control-plane")},
	{"control plane into three voters `kjoin`: learner restarted", restarts("control-plane-3")},
	{"three control planes at once, `kjoin`: round (median)", medianOf("parallel-control-plane", "kjoin join --control-plane x3", wall)},
	{"three at once / three one by one, `kjoin`", parallelRatio("kjoin join --control-plane")},
	{"three at once / three one by one, `kubeadm`", parallelRatio("kubeadm join --control-plane")},
	{"storm, shared token: API requests per join, by N", stormPerJoin("shared token", "requests")},
	{"storm, shared token: requests per join at the largest N / at the smallest (one run)", stormGrowth("shared token")},
	{"storm, shared token: HTTP 429 answers, by N", stormTotal("shared token", "http429")},
	{"storm, a token per host: API requests per join, by N", stormPerJoin("per-host token", "requests")},
	{"storm, a token per host: requests per join at the largest N / at the smallest (one run)", stormGrowth("per-host token")},
	{"storm, a token per host: HTTP 429 answers, by N", stormTotal("per-host token", "http429")},
}

// previous writes the headline figures of this run beside those of an earlier one. Each run's
// figures are its own; only ratios inside one run (the rows that say so) compare like with like.
func previous(b *strings.Builder, samples, earlier []sample, earlierName string) {
	if len(earlier) == 0 {
		return
	}
	started := func(ss []sample) string {
		for _, s := range ss {
			if s.Section == "meta" && s.Meta["started"] != "" {
				return strings.SplitN(s.Meta["started"], "T", 2)[0]
			}
		}
		return "?"
	}
	fmt.Fprintf(b, "## Against the run before\n\nThe same figures from this run and from the run of %s (its samples: %s), each computed alike from its own\n"+
		"samples. The lab, the machine's load and the hosts differ between runs (since 2026-12-02 every lab host boots systemd), so\n"+
		"read kjoin against kubeadm inside each run, not one run's seconds against the other's.\n\n", started(earlier), earlierName)
	fmt.Fprintf(b, "| figure | run of %s | this run (%s) |\n|---|---|---|\n", started(earlier), started(samples))
	for _, f := range headline {
		fmt.Fprintf(b, "| %s | %s | %s |\n", f.name, f.of(earlier), f.of(samples))
	}
	b.WriteString("\n")
}

func medianOf(section, tool string, f func(sample) int64) func([]sample) string {
	return func(ss []sample) string {
		_, by := pick(ss, section)
		st := of(field(by[tool], f))
		if st.n == 0 {
			return "–"
		}
		return sec(st.med)
	}
}

// callMedian is the median count of one API call in the cost section's joins.
func callMedian(tool, call string) func([]sample) string {
	return func(ss []sample) string {
		_, by := pick(ss, "cost")
		if len(by[tool]) == 0 {
			return "–"
		}
		var n []int64
		for _, s := range by[tool] {
			n = append(n, int64(s.Extra[call]))
		}
		return fmt.Sprint(of(n).med)
	}
}

func restarts(section string) func([]sample) string {
	return func(ss []sample) string {
		_, by := pick(ss, section)
		kj := by["kjoin join --control-plane"]
		if len(kj) == 0 {
			return "–"
		}
		n := 0
		for _, s := range kj {
			if s.EtcdRestarted {
				n++
			}
		}
		return fmt.Sprintf("%d of %d joins", n, len(kj))
	}
}

// parallelRatio is a tool's median parallel round over three times its median single join,
// both of the same run.
func parallelRatio(tool string) func([]sample) string {
	return func(ss []sample) string {
		_, par := pick(ss, "parallel-control-plane")
		_, one := pick(ss, "control-plane")
		p, o := of(field(par[tool+" x3"], wall)), of(field(one[tool], wall))
		if p.n == 0 || o.n == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f (%s / 3 × %s)", float64(p.med)/float64(3*o.med), sec(p.med), sec(o.med))
	}
}

// stormRounds are a run's storm rounds with the given token mode, in N order.
func stormRounds(ss []sample, tokens string) []sample {
	var out []sample
	for _, s := range ss {
		if s.Section == "storm" && strings.HasSuffix(s.Tool, tokens) {
			out = append(out, s)
		}
	}
	return out
}

func stormPerJoin(tokens, key string) func([]sample) string {
	return func(ss []sample) string {
		var parts []string
		for _, s := range stormRounds(ss, tokens) {
			switch n := s.Extra["n"]; {
			case n > 0 && s.Extra[key] <= 0:
				// cp1's request counter went back: its API server restarted during the round.
				parts = append(parts, fmt.Sprintf("%.0f: – (API server restarted)", n))
			case n > 0:
				parts = append(parts, fmt.Sprintf("%.0f: %.1f", n, s.Extra[key]/n))
			}
		}
		if len(parts) == 0 {
			return "–"
		}
		return strings.Join(parts, ", ")
	}
}

// stormGrowth is requests per join at a run's largest storm over its smallest.
func stormGrowth(tokens string) func([]sample) string {
	return func(ss []sample) string {
		var lo, hi *sample
		for _, s := range stormRounds(ss, tokens) {
			if s.Extra["n"] <= 0 || s.Extra["requests"] <= 0 {
				continue // no count, or the API server restarted during the round
			}
			if lo == nil || s.Extra["n"] < lo.Extra["n"] {
				lo = &s
			}
			if hi == nil || s.Extra["n"] > hi.Extra["n"] {
				hi = &s
			}
		}
		if lo == nil || hi == lo || lo.Extra["requests"] == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f (N = %.0f against %.0f)", (hi.Extra["requests"]/hi.Extra["n"])/(lo.Extra["requests"]/lo.Extra["n"]), hi.Extra["n"], lo.Extra["n"])
	}
}

// toolRatio is one tool's median wall over another's in a section of one run.
func toolRatio(section, tool, base string) func([]sample) string {
	return func(ss []sample) string {
		_, by := pick(ss, section)
		return ratio(of(field(by[tool], wall)).med, of(field(by[base], wall)).med)
	}
}

func stormTotal(tokens, key string) func([]sample) string {
	return func(ss []sample) string {
		var parts []string
		for _, s := range stormRounds(ss, tokens) {
			parts = append(parts, fmt.Sprintf("%.0f: %.0f", s.Extra["n"], s.Extra[key]))
		}
		if len(parts) == 0 {
			return "–"
		}
		return strings.Join(parts, ", ")
	}
}
