# bench.mk: the reading-cost benchmarks of BENCHMARKS.md. Included by the top Makefile.
#   make bench                 everything (root: loads generated kube-proxy tables into
#                              throwaway network namespaces); results in $(BENCH_OUT)
#   make bench BENCH_SCALES=10k   only 1,000 services / 10,000 endpoints
# CPU time (rusage) is the figure to read; wall time (ns/op) on a shared machine is not.
# The RST probe's own benchmark is described in BENCHMARKS.md ("RST probe overhead").

GO ?= go
BENCH_OUT ?= bin/bench
BENCH_SCALES ?= 10k 100k
BENCH_COUNT_10k ?= 5x
BENCH_COUNT_100k ?= 1x
# iptables-nft-save of a restored 100k-endpoint table runs for many minutes
# (BENCHMARKS.md); skipped unless BENCH_SKIP_100k= is given empty.
BENCH_SKIP_10k ?= ^$$
BENCH_SKIP_100k ?= IPTables/100k/nft|OfflineDiff/100k/iptables-nft
BENCH_DEB_PKGS := iptables nftables iproute2

.PHONY: bench bench-deps

bench-deps:
	@missing=""; for p in $(BENCH_DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

bench: bench-deps
	@test "$$(id -u)" = 0 || { echo "make bench needs root (network namespaces, iptables-restore, nft -f)"; exit 1; }
	mkdir -p $(BENCH_OUT)
	$(GO) test -c -o $(BENCH_OUT)/bench.test ./bench
	set -o pipefail; cd bench && for s in $(BENCH_SCALES); do \
	  count=$(BENCH_COUNT_10k) skip='$(BENCH_SKIP_10k)'; \
	  [ $$s = 100k ] && count=$(BENCH_COUNT_100k) skip='$(BENCH_SKIP_100k)'; \
	  { uptime; ../$(BENCH_OUT)/bench.test -test.run '^$$' -test.bench "/$$s" -test.skip "$${skip:-^$$}" \
	      -test.benchtime $$count -test.timeout 90m; uptime; } | tee ../$(BENCH_OUT)/reading-$$s.txt || exit 1; \
	done

# make bench-live (root): the live cost benchmark of BENCHMARKS.md ("Live: the
# agent beside kube-proxy"). Per mode and scale, a one-node lab (real control
# plane, real kube-proxy, bin/netdrift as a process), BENCH_LIVE_SCALES total
# endpoints (10 per service) written straight to the API server, an idle window
# and one churn window per rate; CPU (with reaped children), peak RSS, start-up
# beside the reference dump, samples per change and lag precision. Tables in
# $(BENCH_LIVE_OUT)/<mode>-<scale>.txt, the whole log in bench-live.log.
# BENCH_LIVE_MODES=cilium: Cilium's load-balancer control plane (cilium-lb) in
# kube-proxy's place, the agent with --datapath=cilium on the node's bpffs.
BENCH_LIVE_OUT ?= bin/bench-live
BENCH_LIVE_MODES ?= nftables iptables-nft iptables-legacy
BENCH_LIVE_SCALES ?= 10k 100k
BENCH_LIVE_RATES ?= 1 20
BENCH_LIVE_SECONDS ?= 60
BENCH_LIVE_IDLE_SECONDS ?= 30
BENCH_LIVE_SYNC_TIMEOUT ?= 30m
BENCH_LIVE_AGENT_ARGS ?=
BENCH_LIVE_AGENT_ENV ?=
# running or stopped: kube-proxy while the objects are created (default: running for iptables-nft only)
BENCH_LIVE_PROXY_START ?=
# runs of the offline `netdrift diff` of kube-proxy's table per mode and scale (0: none)
BENCH_LIVE_OFFLINE_RUNS ?= 5
# a directory: keep each offline diff's inputs in <dir>/<mode>-<scale>/ (for profiling the diff)
BENCH_LIVE_OFFLINE_KEEP ?=
BENCH_LIVE_ENV = NETDRIFT_BENCH_LIVE=1 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift BENCH_LIVE_OUT=$(abspath $(BENCH_LIVE_OUT)) \
	BENCH_LIVE_MODES='$(BENCH_LIVE_MODES)' BENCH_LIVE_SCALES='$(BENCH_LIVE_SCALES)' BENCH_LIVE_RATES='$(BENCH_LIVE_RATES)' \
	BENCH_LIVE_SECONDS=$(BENCH_LIVE_SECONDS) BENCH_LIVE_IDLE_SECONDS=$(BENCH_LIVE_IDLE_SECONDS) \
	BENCH_LIVE_SYNC_TIMEOUT=$(BENCH_LIVE_SYNC_TIMEOUT) BENCH_LIVE_AGENT_ARGS='$(BENCH_LIVE_AGENT_ARGS)' BENCH_LIVE_AGENT_ENV='$(BENCH_LIVE_AGENT_ENV)' BENCH_LIVE_PROXY_START=$(BENCH_LIVE_PROXY_START) \
	BENCH_LIVE_OFFLINE_RUNS=$(BENCH_LIVE_OFFLINE_RUNS) BENCH_LIVE_OFFLINE_KEEP='$(BENCH_LIVE_OFFLINE_KEEP)'

# lab-cilium-bins when cilium-lb or cilium-dbg is missing (only: a rebuild
# rewrites the binaries in place).
BENCH_CILIUM_BINS = $(if $(filter 2,$(words $(wildcard $(CURDIR)/lab/.cache/bin/cilium-lb $(CURDIR)/lab/.cache/bin/cilium-dbg))),,lab-cilium-bins)

.PHONY: bench-live test-bench-live-quick

bench-live: bench-deps build lab-bins $(if $(filter cilium,$(BENCH_LIVE_MODES)),$(BENCH_CILIUM_BINS))
	@test "$$(id -u)" = 0 || { echo "make bench-live needs root (the lab: network namespaces, kube-proxy)"; exit 1; }
	mkdir -p $(BENCH_LIVE_OUT)
	cd $(LAB_DIR) && CGO_ENABLED=0 $(GO) test $(LAB_GOFLAGS) -c -o $(abspath $(BENCH_LIVE_OUT))/benchlive.test ./bench
	set -o pipefail; cd $(LAB_DIR)/bench && { uptime; $(BENCH_LIVE_ENV) $(abspath $(BENCH_LIVE_OUT))/benchlive.test \
	  -test.run '^TestBenchLive$$' -test.v -test.timeout 12h; rc=$$?; uptime; exit $$rc; } 2>&1 | tee $(abspath $(BENCH_LIVE_OUT))/bench-live.log

# The CI variant (root, ~50 s per mode): 1,000 endpoints, one 30 s window at
# 5 changes/s in nftables, iptables-nft and cilium mode; asserts that every
# change yields a lag sample or a counted reason and that both processes' CPU
# was measured, never a time.
test-bench-live-quick: build lab-bins $(BENCH_CILIUM_BINS)
	cd $(LAB_DIR) && CGO_ENABLED=0 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift $(GO) test $(LAB_GOFLAGS) -count=1 -timeout 10m -v \
	  -run '^TestBenchLiveQuick$$|^TestParse|^TestMatch|^TestWorst|^TestReadSelf|^TestSlope$$|^TestWriteSoakCounters$$|^TestSoakChecksSummed$$|^TestRuleIndexes$$|^TestUnexpectedWarning$$|^TestCiliumLagTable$$' ./bench

# make soak (root, ~70 min; not in make test): per mode a one-node lab at
# SOAK_SCALE endpoints, one SOAK_SECONDS churn window at SOAK_RATE changes/s,
# sampling both processes' RSS, the agent's goroutines and findings every
# SOAK_EVERY seconds: slopes, CPU ratio over the whole window, and failures
# for any stale finding or unsampled change. Tables in $(BENCH_LIVE_OUT)/soak-*.txt.
SOAK_MODES ?= nftables iptables-nft
SOAK_SCALE ?= 100k
SOAK_RATE ?= 20
SOAK_SECONDS ?= 1800
SOAK_EVERY ?= 30
# SOAK_AGENT_ARGS: extra agent flags, e.g. --pprof-listen=127.0.0.1:9762 to take
# heap profiles in the node's namespace during the run.
SOAK_AGENT_ARGS ?=
.PHONY: soak
soak: bench-deps build lab-bins
	@test "$$(id -u)" = 0 || { echo "make soak needs root (the lab: network namespaces, kube-proxy)"; exit 1; }
	mkdir -p $(BENCH_LIVE_OUT)
	cd $(LAB_DIR) && CGO_ENABLED=0 $(GO) test $(LAB_GOFLAGS) -c -o $(abspath $(BENCH_LIVE_OUT))/benchlive.test ./bench
	set -o pipefail; cd $(LAB_DIR)/bench && NETDRIFT_SOAK=1 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift BENCH_LIVE_OUT=$(abspath $(BENCH_LIVE_OUT)) \
	  SOAK_MODES='$(SOAK_MODES)' SOAK_SCALE=$(SOAK_SCALE) SOAK_RATE=$(SOAK_RATE) SOAK_SECONDS=$(SOAK_SECONDS) SOAK_EVERY=$(SOAK_EVERY) SOAK_AGENT_ARGS='$(SOAK_AGENT_ARGS)' \
	  $(abspath $(BENCH_LIVE_OUT))/benchlive.test -test.run '^TestSoak$$' -test.v -test.timeout 12h 2>&1 | tee $(abspath $(BENCH_LIVE_OUT))/soak.log

# make bench-watchcost (root, ~8 min at the defaults; not in make test): what
# the agents' API watches cost kube-apiserver beside kube-proxy's. One lab of
# WATCHCOST_NODES nodes, WATCHCOST_ENDPOINTS endpoints (10 per service), one
# churn window of WATCHCOST_SECONDS at WATCHCOST_RATE changes/s per entry of
# WATCHCOST_ORDER (0: no kube-proxy, no agent; 1: a kube-proxy per node;
# 2: a kube-proxy and an agent per node); the API server's and etcd's CPU
# and RSS over each window, its open WATCHes, LISTs and watch events from its
# /metrics. Table in $(WATCHCOST_OUT)/watchcost-<nodes>.txt (BENCHMARKS.md,
# "API server cost of the agents' watches").
WATCHCOST_OUT ?= bin/bench-watchcost
WATCHCOST_NODES ?= 20
WATCHCOST_ENDPOINTS ?= 10k
WATCHCOST_RATE ?= 5
# Node status heartbeats patched per second beside the slice changes (0: none)
WATCHCOST_NODE_RATE ?= 0
WATCHCOST_SECONDS ?= 60
WATCHCOST_ORDER ?= 0 1 2 1
WATCHCOST_SETTLE ?= 20
WATCHCOST_PROXY_MODE ?= nftables
WATCHCOST_AGENT_ARGS ?=
.PHONY: bench-watchcost
bench-watchcost: bench-deps build lab-bins
	@test "$$(id -u)" = 0 || { echo "make bench-watchcost needs root (the lab: network namespaces, kube-proxy)"; exit 1; }
	mkdir -p $(WATCHCOST_OUT)
	cd $(LAB_DIR) && CGO_ENABLED=0 $(GO) test $(LAB_GOFLAGS) -c -o $(abspath $(WATCHCOST_OUT))/watchcost.test ./bench
	set -o pipefail; cd $(LAB_DIR)/bench && { uptime; NETDRIFT_BENCH_WATCHCOST=1 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift \
	  WATCHCOST_OUT=$(abspath $(WATCHCOST_OUT)) WATCHCOST_NODES=$(WATCHCOST_NODES) WATCHCOST_ENDPOINTS=$(WATCHCOST_ENDPOINTS) \
	  WATCHCOST_RATE=$(WATCHCOST_RATE) WATCHCOST_NODE_RATE=$(WATCHCOST_NODE_RATE) WATCHCOST_SECONDS=$(WATCHCOST_SECONDS) WATCHCOST_ORDER='$(WATCHCOST_ORDER)' \
	  WATCHCOST_SETTLE=$(WATCHCOST_SETTLE) WATCHCOST_PROXY_MODE=$(WATCHCOST_PROXY_MODE) WATCHCOST_AGENT_ARGS='$(WATCHCOST_AGENT_ARGS)' \
	  $(abspath $(WATCHCOST_OUT))/watchcost.test -test.run '^TestBenchWatchCost$$' -test.v -test.timeout 3h; rc=$$?; uptime; exit $$rc; } \
	  2>&1 | tee $(abspath $(WATCHCOST_OUT))/watchcost-$(WATCHCOST_NODES)-nodes$(WATCHCOST_NODE_RATE).log
