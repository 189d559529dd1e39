# Grapnel build, test and check targets. `make test` is what CI runs.
GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
# The install is one multi-call binary, grapnel, and links to it by the
# names of its programs (cmd/grapnel/multicall.go), so that units and
# Ankaios-style scripts find them as before; and the process workloads'
# shim, grapnel-process-shim, as a file of its own: 2.4 MB that starts in
# a fiftieth of the CPU and runs in a quarter of the memory (PSS) the
# multi-call binary takes as the shim (docs/operations.md, "Install size and targets").
LINKS     := grapnel-server grapnel-agent
TEST_TIMEOUT ?= 15m

.PHONY: all build build-arm64 smoke-arm64 check-linked sizes test check demo proto bench bench-quick bench-failover-short bench-agents bench-vehicle bench-vehicle-quick bench-start bench-micro fuzz clean tools podman-setup chaos chaos-short upgrade-test upgrade-test-short

all: build

# --version prints the release, the formats the build understands and the
# commit Go stamps into a build from this work tree; COMMIT is what it
# prints when the stamp is missing (GOFLAGS=-buildvcs=false). VERSION is
# the release: the file VERSION unless set (make build VERSION=0.4.1);
# internal/buildinfo's default is the same text for builds without make.
# The programs are built static (CGO_ENABLED=0): no libc mapped, about
# 1 MiB less RSS per process (docs/operations.md). -trimpath and -s -w
# leave the build's paths, the symbol table and DWARF out: about a third
# of the file (docs/operations.md, "Install size and targets").
BUILDINFO := github.com/grapnel-io/grapnel/internal/buildinfo
COMMIT    ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
VERSION   ?= $(shell cat VERSION)
LDFLAGS   := -s -w -X $(BUILDINFO).Commit=$(COMMIT) -X $(BUILDINFO).Version=$(VERSION)
# grpcnotrace leaves out golang.org/x/net/trace, gRPC's debug pages that
# nothing here turns on (grpc.EnableTracing): 0.33 MB on arm64.
TAGS      := grpcnotrace
BUILDFLAGS = -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)'

# bin/grapnel, its links and the shim (for this machine's architecture).
build:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -o bin/grapnel ./cmd/grapnel
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -o bin/grapnel-process-shim ./cmd/grapnel-process-shim
	@for l in $(LINKS); do ln -sfn grapnel bin/$$l; done

# The same for aarch64 (vehicle central compute), into bin/linux-arm64/;
# CI runs it under qemu-user (scripts/arm64-smoke.sh).
build-arm64:
	@mkdir -p bin/linux-arm64
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(BUILDFLAGS) -o bin/linux-arm64/grapnel ./cmd/grapnel
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(BUILDFLAGS) -o bin/linux-arm64/grapnel-process-shim ./cmd/grapnel-process-shim
	@for l in $(LINKS); do ln -sfn grapnel bin/linux-arm64/$$l; done

# The arm64 install under qemu-user (root: installs qemu-user-binfmt and
# registers it): 3 replicas, 2 agents, process workloads, a leader kill,
# no workload restarted; fails, not skips, when qemu cannot be set up.
smoke-arm64:
	./scripts/arm64-smoke.sh

# The install links nothing the vehicle does not run: no test harness, no
# browser driver, no FUSE library (scripts/check-linked.sh).
check-linked: build build-arm64
	@./scripts/check-linked.sh bin/grapnel bin/grapnel-process-shim bin/linux-arm64/grapnel bin/linux-arm64/grapnel-process-shim

# The install's size by package, for amd64 and arm64 (docs/operations.md).
sizes:
	@./scripts/size-by-package.sh

# Unit, integration and end-to-end tests with the race detector. Fuzz
# targets run over their seed corpus as ordinary tests. The tests that
# run the programs take them from bin/, built once here, instead of each
# test package linking its own (chaos/bench.BuildCommands).
test: build
	GRAPNEL_TEST_BIN_DIR=$(CURDIR)/bin $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

# Longer fuzzing of the parsers: FUZZTIME per target.
FUZZTIME ?= 30s
# Every package with a fuzz target, found in the tree so that none is
# missed and none that moved is named.
FUZZPKGS ?= $(shell grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
fuzz:
	@for p in $(FUZZPKGS); do \
		for t in $$($(GO) test -list 'Fuzz.*' $$p | grep ^Fuzz); do \
			$(GO) test $$p -run XXX -fuzz "^$$t$$" -fuzztime $(FUZZTIME) || exit 1; done; done

# The generators the committed .pb.go files were made with: the check
# regenerates them and fails on any difference, the version line included.
PROTOC_GEN_GO      ?= v1.36.12
PROTOC_GEN_GO_GRPC ?= v1.6.2

tools:
	@command -v protoc >/dev/null || (apt-get update -qq && apt-get install -y -qq protobuf-compiler)
	@$(GOBIN)/protoc-gen-go --version 2>/dev/null | grep -qx 'protoc-gen-go $(PROTOC_GEN_GO)' || $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO)
	@$(GOBIN)/protoc-gen-go-grpc --version 2>/dev/null | grep -qx 'protoc-gen-go-grpc $(PROTOC_GEN_GO_GRPC:v%=%)' || $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC)
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest

# Static checks; any finding fails.
check: tools
	@echo "gofmt"; out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOBIN)/staticcheck ./...
	@echo "go mod tidy"; cp go.mod /tmp/grapnel.go.mod; cp go.sum /tmp/grapnel.go.sum; $(GO) mod tidy; \
		if ! diff -q go.mod /tmp/grapnel.go.mod >/dev/null || ! diff -q go.sum /tmp/grapnel.go.sum >/dev/null; then \
		echo "go.mod/go.sum not tidy"; cp /tmp/grapnel.go.mod go.mod; cp /tmp/grapnel.go.sum go.sum; exit 1; fi
	@echo "generated code in sync"; ./scripts/genproto.sh && git diff --exit-code -- 'rpc/*/*.pb.go' 'fsm/*/*.pb.go' && \
		test -z "$$(git status --porcelain -- 'rpc/*/*.pb.go' 'fsm/*/*.pb.go')"
	@./scripts/check-purity.sh
	@./scripts/check-clock.sh
	@./scripts/check-durable.sh
	@./scripts/check-raft-apply.sh
	@./scripts/check-tracked.sh
	@$(MAKE) -s check-linked

proto: tools
	./scripts/genproto.sh

# Cluster benchmarks: 3 replicas vs 3 etcd members (1/16/64 clients), then
# 50 leader kills and 50 leader freezes (SIGSTOP), plain and with TLS on
# every channel side by side; the report goes to .bench/results/latest.txt.
bench:
	./scripts/bench.sh

# Every part with short bounds (about a minute).
bench-quick:
	./scripts/bench.sh --quick

# Three leader kills and three freezes, no etcd; a short failover run
# (make test also runs TestFailoverShort and TestFailoverFreezes).
bench-failover-short:
	./scripts/bench.sh --failover-short

# Agents across leader kills, with mTLS: reconnect time over 50 kills,
# workloads restarted, apply→Running for a process and a podman workload,
# agent RSS; the report goes to .bench/results/agents.txt.
bench-agents:
	./scripts/bench.sh --agents

# What a vehicle asks: the idle footprint of 3 replicas and 5 agents with
# 10 process workloads each (bytes written per hour, CPU, RSS per process),
# single-replica exec -> first answer (empty and existing data), the
# start of a whole cluster with state, and power cycles of all of it in a
# pid namespace (power-on -> API and -> every workload Running again); the
# report goes to .bench/results/vehicle.txt. The quick version measures
# shorter windows and 3 power cycles.
bench-vehicle:
	./scripts/bench.sh --vehicle

bench-vehicle-quick:
	./scripts/bench.sh --vehicle-quick

# Installs podman, applies the settings this machine needs and builds the
# offline test image (root; .ci/run runs it before the tests).
podman-setup:
	./scripts/podman-setup.sh

# Chaos campaign in network namespaces (root): faults at random from SEED
# (0 draws one, printed) for DURATION, checkers, failover figures and a
# comparison with hashicorp/raft's default timing; the report goes to
# .chaos/<timestamp>/. See docs/chaos.md. Its upgrade fault runs the previous
# release (.ci/previous-release), built from git into bin/previous-<commit>/
# by the first run and reused.
DURATION ?= 30m
SEED ?= 0
# Rounds of every fault kind a long campaign runs at least, past DURATION
# if needed: the failover figures are over at least 20 faults of each kind.
MIN_ROUNDS ?= 20
# Rolling upgrade and rollback between the previous release
# (.ci/previous-release, built from git) and this tree: 3 replicas and 3
# agents moved forward, back and forward again, then finalized, with no
# workload restarted and no acknowledged write lost (docs/upgrade.md).
upgrade-test:
	$(GO) run ./chaos/cmd/grapnel-upgrade

# The CI version: the same steps without write bursts and a replica kept
# behind.
upgrade-test-short:
	$(GO) run ./chaos/cmd/grapnel-upgrade -short

# SEAMS_STEPS is the length of the generative test of the seams
# (agent.TestSeams, issue 30) the chaos target runs first, from a drawn
# seed; make test runs 30 steps of one fixed sequence. Before it, the
# planner's randomized test with all its rounds, without the race detector
# (make test runs a tenth of them under it).
SEAMS_STEPS ?= 400
chaos: build
	$(GO) test -count=1 -run '^TestPlanPredictsApply$$' ./server/
	GRAPNEL_SEAMS_SEED=random GRAPNEL_SEAMS_STEPS=$(SEAMS_STEPS) $(GO) test -race -count=1 -timeout 60m -run '^TestSeams$$' -v ./agent/
	$(GO) build -o bin/ ./chaos/cmd/grapnel-chaos
	./bin/grapnel-chaos run --duration $(DURATION) --min-rounds $(MIN_ROUNDS) --seed $(SEED)

# Every fault kind once, in well under 10 minutes. RAFT_LOG_STORE=bolt runs
# the replicas on raft-boltdb/v2 (--raft-log-store bolt; without the
# upgrade and corrupt-log faults, which are the WAL's).
RAFT_LOG_STORE ?=
chaos-short: build
	$(GO) build -o bin/ ./chaos/cmd/grapnel-chaos
	./bin/grapnel-chaos run --short --seed $(SEED) $(if $(RAFT_LOG_STORE),--raft-log-store $(RAFT_LOG_STORE))

# A single replica and `grapnel get state` exec'd at the same moment, 20
# starts on a fresh data directory and 20 on existing data, with the
# binaries `make build` ships: exec -> the CLI's answer (p50, p90, p99,
# every figure). BEFORE=path/to/grapnel measures that CLI too,
# alternately, in the same run.
bench-start: build
	mkdir -p .bench
	$(GO) build -o .bench/grapnel-start-bench ./chaos/bench/cmd/grapnel-start-bench
	.bench/grapnel-start-bench -grapnel-server bin/grapnel-server -grapnel bin/grapnel $(if $(BEFORE),-grapnel-before $(BEFORE)) -out .bench/results/start.txt

# In-process micro benchmarks; BENCHTIME and COUNT tune the run
# (benchstat-friendly output).
BENCHTIME ?= 1s
COUNT ?= 5
bench-micro:
	$(GO) test -run XXX -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) ./state/ ./server/... ./fsm/ | tee bench.out

# One replica with a startup manifest; shows the state, then stops.
demo: build
	./scripts/demo.sh

clean:
	rm -rf bin bench.out .bench
