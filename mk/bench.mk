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
BENCH_SKIP_100k ?= IPTables/100k/nft
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
