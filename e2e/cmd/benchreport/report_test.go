package main

import (
	"fmt"
	"strings"
	"testing"
)

// The report is computed from the samples: warm-up rounds are left out, medians and ratios
// come from the same run, and kjoin's own time is split from the kubelet's.
func TestReportFromSamples(t *testing.T) {
	samples, err := load("testdata/samples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	worker(&b, samples)
	controlPlane(&b, samples)
	cost(&b, samples)
	storm(&b, samples)
	out := b.String()
	for _, want := range []string{
		"| `kubeadm join` | 2 | 2.00 s / **3.00 s** / 4.00 s |", // warm-up (9 s) left out; the true median of 2 and 4
		"| `kjoin join` | 2 | 1.00 s / **1.20 s** / 1.40 s | 1.10 s / **1.30 s** / 1.50 s | 0.30 s / **0.40 s** / 0.50 s | 0.80 s / **0.90 s** / 1.00 s |",
		"| `kjoin join` | 0.40 | 0.41 |", // 1.2/3.0 and 1.3/3.2
		"kjoin / kubeadm, medians of this run: wall 0.40, start → Ready 0.40, start → voter 0.27",
		"| discovery | 0.05 s / **0.05 s** / 0.05 s |",
		"## Control-plane join into three voters",
		"| `kjoin join` | 1 | 20 (20–20) | 5 (5–5) |",
		"| get configmaps | 8 | 3 |",
		"| `kjoin join --control-plane` | 1 | 12.00 s / **12.00 s** / 12.00 s | 12.50 s / **12.50 s** / 12.50 s | 6.00 s / **6.00 s** / 6.00 s |",
		"| mark-control-plane | 0.00 s / **0.00 s** / 0.00 s |", // a phase of 0 ms is kept
		"| 200 | 1 host, shared token | 200 | 200 | 30.00 s |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "| discovery |") > strings.Index(out, "| etcd-join |") {
		t.Error("phases are not in join order")
	}
}

// The report states the run's machine, versions, seed and command from the run's own meta
// sample, not from what is installed when it is generated.
func TestHeaderFromTheRunsMeta(t *testing.T) {
	samples := []sample{{Section: "meta", Meta: map[string]string{"kjoin": "v0.3.9 (commit abc, go1.26.8)", "machine": "2 cores, 23 GiB, linux/amd64",
		"seed": "42", "command": "make bench BENCH_ROUNDS=10", "started": "2026-12-01T10:00:00Z", "binary linux/amd64": "50.0 MiB (1 bytes)"}},
		{Section: "worker", Tool: "kjoin join", OK: true, WallMs: 1}}
	var b strings.Builder
	header(&b, samples, "BENCHMARKS.samples.jsonl", "make bench (flag)", "/nonexistent/kjoin", "/nonexistent")
	out := b.String()
	for _, want := range []string{"(1 samples, run started 2026-12-01T10:00:00Z)", "produced by `make bench BENCH_ROUNDS=10`", "Order seed 42", "| kjoin | v0.3.9 (commit abc, go1.26.8) |"} {
		if !strings.Contains(out, want) {
			t.Errorf("header lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "read when this report was generated") {
		t.Errorf("a run with its meta is said to have none:\n%s", out)
	}
}

// An audited storm round's requests are tabled per join, by client (its total first) and
// call, one column per round; 429 answers on their own row, out of the total.
func TestStormAuditPerJoin(t *testing.T) {
	ss := []sample{
		{Section: "storm", Extra: map[string]float64{"n": 200, "audit anonymous (discovery)|get configmaps": 400,
			"audit bootstrap token (CSR)|create certificatesigningrequests": 200, "audit bootstrap token (CSR)|watch certificatesigningrequests": 300,
			"audit bootstrap token (CSR)|429": 20}},
		{Section: "storm", Extra: map[string]float64{"n": 400, "audit anonymous (discovery)|get configmaps": 1200}},
		{Section: "storm", Extra: map[string]float64{"n": 800}}, // not audited: no column
	}
	var b strings.Builder
	stormAudit(func(f string, a ...any) { b.WriteString(fmt.Sprintf(f, a...)) }, ss)
	out := b.String()
	for _, want := range []string{
		"| client | call | N=200 | N=400 |",
		"| **anonymous (discovery)** | all | **2.00** | **3.00** |",
		"| | get configmaps | 2.00 | 3.00 |",
		"| **bootstrap token (CSR)** | all | **2.50** | **0.00** |",
		"| | 429 | 0.10 | 0.00 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "N=800") {
		t.Errorf("an unaudited round has a column:\n%s", out)
	}
}

// The run before's headline figures stand beside this run's, each computed from its own
// samples (warm-ups left out); without an earlier run there is no such section.
func TestAgainstTheRunBefore(t *testing.T) {
	run := func(date string, kjoinCP, kubeadmCP int64, restarted bool, perJoin200, perJoin1600 float64) []sample {
		return []sample{
			{Section: "meta", Meta: map[string]string{"started": date + "T10:00:00Z"}},
			{Section: "control-plane", Tool: "kjoin join --control-plane", Warmup: true, WallMs: 99000, EtcdRestarted: true},
			{Section: "control-plane", Tool: "kjoin join --control-plane", WallMs: kjoinCP, EtcdRestarted: restarted},
			{Section: "control-plane", Tool: "kubeadm join --control-plane", WallMs: kubeadmCP},
			{Section: "cost", Tool: "kjoin join", Extra: map[string]float64{"get nodes": perJoin200}},
			{Section: "storm", Tool: "kjoin join phase tls-bootstrap x200 from 3 hosts, shared token", Extra: map[string]float64{"n": 200, "requests": 200 * perJoin200, "http429": 0}},
			{Section: "storm", Tool: "kjoin join phase tls-bootstrap x1600 from 3 hosts, shared token", Extra: map[string]float64{"n": 1600, "requests": 1600 * perJoin1600, "http429": 70}},
		}
	}
	before, now := run("2026-12-01", 6000, 15000, true, 10, 70), run("2026-12-06", 12000, 30000, false, 9, 10)
	// A round whose API server restarted (its request counter went back) is shown, not counted.
	now = append(now, sample{Section: "storm", Tool: "kjoin join phase tls-bootstrap x100 from 3 hosts, shared token", Extra: map[string]float64{"n": 100, "requests": -500}})
	var b strings.Builder
	previous(&b, now, before, "git show X:BENCHMARKS.samples.jsonl")
	out := b.String()
	for _, want := range []string{
		"| figure | run of 2026-12-01 | this run (2026-12-06) |",
		"| control plane `kjoin`: wall (median) | 6.00 s | 12.00 s |",
		"| control plane, kjoin / kubeadm wall (medians, one run) | 0.40 | 0.40 |",
		"| control plane `kjoin`: learner restarted | 1 of 1 joins | 0 of 1 joins |", // the warm-up's restart left out
		"| worker `kjoin join`: Node GETs until Ready (median) | 10 | 9 |",
		"| storm, shared token: API requests per join, by N | 200: 10.0, 1600: 70.0 | 200: 9.0, 1600: 10.0, 100: – (API server restarted) |",
		"| storm, shared token: requests per join at the largest N / at the smallest (one run) | 7.00 (N = 1600 against 200) | 1.11 (N = 1600 against 200) |",
		"| storm, shared token: HTTP 429 answers, by N | 200: 0, 1600: 70 | 200: 0, 1600: 70, 100: 0 |",
		"| storm, a token per host: API requests per join, by N | – | – |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	previous(&b, now, nil, "")
	if b.Len() != 0 {
		t.Errorf("a comparison without an earlier run:\n%s", b.String())
	}
}
