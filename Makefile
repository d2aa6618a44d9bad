# kjoin — build, unit tests, and the local multi-host lab (needs root for the lab).
SHELL := /bin/bash
GO ?= go
export KJOIN_CACHE ?= /var/cache/kjoin
export KJOIN_ARTIFACTS ?= $(CURDIR)/_artifacts
E2E_TIMEOUT ?= 70m

.PHONY: all build check fuzz mutants mutants-changed mutants-hand test dist e2e components lab-up lab-down lab-status demo bench matrix clean

all: build

## build: the kjoin binary (bin/kjoin), its lab twin with the fault hook (bin/kjoin-fault) and the lab command (bin/lab)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(STAMP_LDFLAGS)" -o bin/kjoin ./cmd/kjoin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(STAMP_LDFLAGS)" -tags kjoin_fault -o bin/kjoin-fault ./cmd/kjoin
	$(GO) build -o bin/lab ./e2e/cmd/lab

## check: vet, unit tests (hermetic, no root; the fuzz seed corpora run as plain tests) and the
## hand mutations (go vet runs once, over the tests too: go test does not vet again); timed
## fuzzing (each target builds an instrumented client-go) is make fuzz
check:
	$(GO) vet ./...
	$(GO) test -vet=off -count=1 ./...
	$(MAKE) --no-print-directory mutants-hand

## mutants-hand: hand mutations of security-critical lines, each of which must fail a unit test
mutants-hand:
	$(GO) run ./e2e/cmd/mutants

## mutants: the mutation score: go-gremlins over the critical packages (MUTANT_PACKAGES, default
## all of them), each survivor checked against e2e/mutants-baseline.tsv; writes MUTANTS.md. Long
## (its time is in MUTANTS.md): not part of make test
MUTANT_PACKAGES ?=
mutants:
	$(GO) run ./e2e/cmd/mutationscore $(if $(MUTANT_PACKAGES),-packages $(MUTANT_PACKAGES))

## mutants-changed: the mutation check of what changed: in each scored package, only the lines
## changed since its last score in MUTANTS.md (a package unchanged since is skipped); a survivor
## not in the baseline fails it; writes no report
mutants-changed:
	$(GO) run ./e2e/cmd/mutationscore -changed $(if $(MUTANT_PACKAGES),-packages $(MUTANT_PACKAGES))

## fuzz: each fuzz test for FUZZTIME (seed corpora in */testdata/fuzz)
FUZZTIME ?= 3s
FUZZ_TARGETS := token:FuzzParse discovery:FuzzParsePin discovery:FuzzClusterInfo discovery:FuzzSelectCluster \
	discovery:FuzzCheckEndpoint certs:FuzzParseCertificateKey patches:FuzzParseName joinconfig:FuzzDecode joinstring:FuzzParse
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t#*:}; \
	  $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$pkg || exit 1; done

## components: lab packages, the real Kubernetes/etcd programs (cached by version) and the
## hosts' root filesystem (cached). The programs need only Go, so they build from the start;
## the packages (the mirror's time, and debootstrap for the root filesystem) and then the root
## filesystem come beside them
components:
	@set -e; { e2e/scripts/install-deps.sh && e2e/rootfs/build.sh >/dev/null; } & host=$$!; \
	status=0; e2e/components/build.sh || status=$$?; \
	wait $$host || status=$$?; exit $$status

## e2e: the lab suite (root); always tears the lab down
e2e: build components
	@set -o pipefail; status=0; \
	KJOIN_BIN=$(CURDIR)/bin/kjoin-fault KJOIN_COMPONENTS=$$(e2e/components/build.sh) \
	  $(GO) test -tags e2e -p 1 -count=1 -v -timeout $(E2E_TIMEOUT) ./e2e/... || status=$$?; \
	bin/lab down || true; exit $$status

## test: unit tests and the lab suite. On a cold machine the lab's programs take half of the
## time (CPU-bound: the Go compiler on every core), the lab the other half (its hosts idle
## half of the CPU). So kjoin and the lab command build beside the programs (the lab needs
## them), and make check (vet, unit tests, hand mutations: 15 CPU-minutes cold) runs beside
## the lab suite, niced so that it takes only what the lab leaves; this keeps make test under
## an hour on a cold machine. Both logs are printed after; either failing fails make test.
test:
	@mkdir -p $(KJOIN_ARTIFACTS); \
	$(MAKE) --no-print-directory components > $(KJOIN_ARTIFACTS)/components.log 2>&1 & prep=$$!; \
	status=0; $(MAKE) --no-print-directory build || status=$$?; \
	prepstatus=0; wait $$prep || prepstatus=$$?; \
	echo "--- make components (built beside kjoin; $(KJOIN_ARTIFACTS)/components.log)"; \
	grep -v '^I: ' $(KJOIN_ARTIFACTS)/components.log | tail -n 60; \
	[ $$status -eq 0 ] || exit $$status; \
	[ $$prepstatus -eq 0 ] || { echo "make components failed (exit $$prepstatus)"; exit $$prepstatus; }; \
	nice -n 19 $(MAKE) --no-print-directory check > $(KJOIN_ARTIFACTS)/check.log 2>&1 & check=$$!; \
	$(MAKE) --no-print-directory e2e || status=$$?; \
	checkstatus=0; wait $$check || checkstatus=$$?; \
	echo "--- make check (beside the lab suite; $(KJOIN_ARTIFACTS)/check.log)"; \
	grep -v '^go: downloading ' $(KJOIN_ARTIFACTS)/check.log; \
	[ $$checkstatus -eq 0 ] || { echo "make check failed (exit $$checkstatus)"; exit $$checkstatus; }; \
	exit $$status

lab-up: build components
	KJOIN_BIN=$(CURDIR)/bin/kjoin KJOIN_COMPONENTS=$$(e2e/components/build.sh) bin/lab up

lab-down: build
	bin/lab down

lab-status: build
	bin/lab status

clean:
	rm -rf bin _artifacts

## bench: kubeadm beside kjoin in one lab run (worker and control-plane joins in random order on
## rotated hosts, a warm-up round, three control planes at once, nine workers at once, bootstrap
## storms of growing size); raw samples into BENCHMARKS.samples.jsonl, BENCHMARKS.md generated from them
BENCH_ROUNDS ?= 10
BENCH_CP_ROUNDS ?= 10
BENCH_PARALLEL_ROUNDS ?= 20
BENCH_STORM ?= 200,400,800,1600
BENCH_STORM_HOSTS ?= w7,w8,w9
BENCH_STORM_TOKENS ?= shared,per-host
BENCH_SAMPLES := $(KJOIN_ARTIFACTS)/bench.samples.jsonl
bench: build components
	@set -o pipefail; status=0; mkdir -p $(KJOIN_ARTIFACTS); rm -f $(BENCH_SAMPLES); \
	KJOIN_BENCH=1 KJOIN_BENCH_SAMPLES=$(BENCH_SAMPLES) KJOIN_BENCH_COMMAND="make bench BENCH_ROUNDS=$(BENCH_ROUNDS) BENCH_CP_ROUNDS=$(BENCH_CP_ROUNDS) BENCH_PARALLEL_ROUNDS=$(BENCH_PARALLEL_ROUNDS) BENCH_STORM=$(BENCH_STORM) BENCH_STORM_HOSTS=$(BENCH_STORM_HOSTS) BENCH_STORM_TOKENS=$(BENCH_STORM_TOKENS)" KJOIN_BENCH_ROUNDS=$(BENCH_ROUNDS) KJOIN_BENCH_CP_ROUNDS=$(BENCH_CP_ROUNDS) \
	KJOIN_PARALLEL_ROUNDS=$(BENCH_PARALLEL_ROUNDS) KJOIN_STORM=$(BENCH_STORM) KJOIN_STORM_EXPLORE=1 KJOIN_STORM_TO_THE_END=1 \
	KJOIN_STORM_HOSTS=$(BENCH_STORM_HOSTS) KJOIN_STORM_TOKENS=$(BENCH_STORM_TOKENS) \
	KJOIN_BIN=$(CURDIR)/bin/kjoin KJOIN_COMPONENTS=$$(e2e/components/build.sh) \
	  $(GO) test -tags e2e -p 1 -count=1 -v -run 'TestBench|TestControlPlaneParallel|TestNineWorkersAtOnce|TestBootstrapStorm' -timeout 240m ./e2e/ || status=$$?; \
	bin/lab down || true; \
	if [ $$status -eq 0 ]; then prev=$$(git log -1 --format=%h -- BENCHMARKS.samples.jsonl); \
	  git show $$prev:BENCHMARKS.samples.jsonl > $(KJOIN_ARTIFACTS)/previous.samples.jsonl && cp $(BENCH_SAMPLES) BENCHMARKS.samples.jsonl && \
	  KJOIN_COMPONENTS=$$(e2e/components/build.sh) $(GO) run ./e2e/cmd/benchreport -samples BENCHMARKS.samples.jsonl -out BENCHMARKS.md \
	    -previous $(KJOIN_ARTIFACTS)/previous.samples.jsonl -previous-name "BENCHMARKS.samples.jsonl at $$prev" \
	    -command "make bench BENCH_ROUNDS=$(BENCH_ROUNDS) BENCH_CP_ROUNDS=$(BENCH_CP_ROUNDS) BENCH_PARALLEL_ROUNDS=$(BENCH_PARALLEL_ROUNDS) BENCH_STORM=$(BENCH_STORM)"; \
	else exit $$status; fi

## matrix: the compatibility matrix: one compact suite per cell, each on a fresh lab at the
## cell's Kubernetes version (cluster VERSION; VERSION:kubelet-KVERSION for a skewed worker;
## VERSION:upgrade-TARGET for kubeadm upgrade of kjoin-joined nodes; VERSION:runtime-NAME for
## joined nodes on another container runtime; VERSION:ipv6 and VERSION:dual for the address
## families); the run's rows replace those cells' rows in COMPATIBILITY.results.jsonl,
## COMPATIBILITY.md generated from them
MATRIX_CELLS ?= v1.37.2 v1.36.3 v1.35.4 v1.37.2:kubelet-v1.34.4 v1.37.2:kubelet-v1.35.4 v1.37.2:kubelet-v1.36.3 v1.36.3:upgrade-v1.37.2 v1.37.2:runtime-containerd-v2.4.2 v1.37.2:ipv6 v1.37.2:dual
matrix: build
	e2e/scripts/install-deps.sh
	e2e/scripts/matrix.sh $(MATRIX_CELLS)

## demo: lab up, kjoin a worker and a control plane, show nodes and etcd members
demo: build components
	KJOIN_BIN=$(CURDIR)/bin/kjoin KJOIN_COMPONENTS=$$(e2e/components/build.sh) e2e/scripts/demo.sh

## dist: static, stripped, version-stamped kjoin for linux/amd64 and linux/arm64, shell
## completions, .deb packages (nfpm) and SHA256SUMS in dist/
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# DIST_ARCHES=amd64: the lab's package test builds only what it installs
DIST_ARCHES ?= amd64 arm64
NFPM ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
STAMP_LDFLAGS = -X kjoin.dev/kjoin/cmd/kjoin/app.Version=$(VERSION) -X kjoin.dev/kjoin/cmd/kjoin/app.Commit=$(COMMIT) -X kjoin.dev/kjoin/cmd/kjoin/app.BuildDate=$(BUILD_DATE)
DIST_LDFLAGS = -s -w -X kjoin.dev/kjoin/cmd/kjoin/app.Version=$(VERSION) -X kjoin.dev/kjoin/cmd/kjoin/app.Commit=$(COMMIT) -X kjoin.dev/kjoin/cmd/kjoin/app.BuildDate=$(BUILD_DATE)
dist:
	rm -rf dist && mkdir -p dist/completions
	for arch in $(DIST_ARCHES); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(DIST_LDFLAGS)" -o dist/kjoin-linux-$$arch ./cmd/kjoin || exit 1; \
	done
	for sh in bash zsh fish; do dist/kjoin-linux-amd64 completion $$sh > dist/completions/kjoin.$$sh || exit 1; done
	$(GO) run ./packaging/genman dist/man '$(VERSION)' && gzip -9n dist/man/*.1
	deb=$$(packaging/debversion.sh '$(VERSION)'); \
	packaging/changelog.sh "$$deb" | gzip -9n > dist/changelog.gz; \
	for arch in $(DIST_ARCHES); do \
	  cp dist/kjoin-linux-$$arch dist/kjoin && \
	  DEB_ARCH=$$arch DEB_VERSION=$$deb $(NFPM) package --packager deb --config packaging/nfpm.yaml --target dist/ || exit 1; \
	done; rm -f dist/kjoin
	cd dist && sha256sum kjoin-linux-* *.deb > SHA256SUMS
	dist/kjoin-linux-amd64 version
