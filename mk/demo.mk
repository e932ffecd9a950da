# make demo: a 3-node lab (kube-proxy iptables mode) with one netdrift agent
# per node and Prometheus (deploy/'s rules as shipped), and a narrated story
# printed with netdrift's own tables and the alerts as Prometheus reports
# them; screenshots of Prometheus' /alerts and of each dashboard panel's
# queries (headless chromium) go to DEMO_SHOTS, beside the transcript
# (docs/demo-transcript.txt). The lab stays up afterwards; `make demo-down`
# removes it (the demo removes it itself on failure or Ctrl-C). Needs root.
# Under `flock LOCK make demo` the lab's runner inherits the lock and holds it
# while the lab stays up: run `make demo-down` without the lock.
#
# make test-lab: the lab scenarios CI runs (every shell line of docs/install.md and
# docs/runbook.md, run as written with kubectl, helm and jq; rollout, frozen kube-proxy and the node
# reports with their own-node admission policies in iptables mode, frozen kube-proxy in nftables mode; in iptables mode also
# the alerts through the lab Prometheus: quiet under churn, NetdriftStaleDNAT
# for a frozen kube-proxy, the watch alerts with the API server down, and
# every dashboard panel's queries returning series; kubectl-netdrift through
# the API server's port-forward and over NodeReports; the fast faults: an
# agent killed mid-rollout, kube-proxy restarted (both modes), a DNAT rule
# deleted by hand, skewed trigger times) plus the scenario helpers' unit tests.
# make test-lab-faults: every fault scenario (also the API server restarted
# during changes) in both modes. make test-lab-alerts: the slow alerts (ready refusals
# 2m, agent down 5m). make test-lab-all: every scenario in both modes.
DEMO_NAME ?= demo
DEMO_SHOTS ?= $(CURDIR)/docs/demo-screenshots
# what the demo prints is also written here (the transcript the docs show)
DEMO_TRANSCRIPT ?= $(CURDIR)/docs/demo-transcript.txt
SCENARIO_GO := cd $(LAB_DIR) && CGO_ENABLED=0 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift $(GO) test $(LAB_GOFLAGS) -count=1

.PHONY: demo demo-down test-lab test-lab-all test-lab-rollout10 test-lab-alerts test-lab-faults bench-reports

demo: deps build lab-bins
	set -o pipefail; { echo '$$ make demo'; $(LAB_RUN) demo -name $(DEMO_NAME) -agent $(CURDIR)/$(BIN)/netdrift -screenshots $(DEMO_SHOTS); } 2>&1 | tee $(DEMO_TRANSCRIPT)

demo-down:
	$(LAB_RUN) down -name $(DEMO_NAME)

test-lab: build lab-bins lab-deps $(HELM)
	export NETDRIFT_HELM=$(HELM); $(SCENARIO_GO) -timeout 40m -v \
		-run 'TestParse|TestMatch|TestQuantile|TestNormalize|TestSubstitute|TestDocCommandsRun|TestDocShellLines|TestScenarios/(iptables|nftables)/(quiet|docs|rollout|readyrefusals|frozen|stalealert|nodereports|reportpolicy|agentrestart|kprestart|ruledeleted|triggerskew|panels|plugin|watchalert)$$' \
		-skip 'TestScenarios/nftables/(quiet|docs|rollout|readyrefusals|stalealert|nodereports|reportpolicy|agentrestart|ruledeleted|triggerskew|panels|plugin|watchalert)$$' ./scenarios

test-lab-faults: build lab-bins $(HELM)
	export NETDRIFT_HELM=$(HELM); $(SCENARIO_GO) -timeout 30m -v \
		-run 'TestScenarios/(iptables|nftables)/(agentrestart|kprestart|ruledeleted|triggerskew|apirestart)$$' ./scenarios

test-lab-alerts: build lab-bins
	export NETDRIFT_LAB_SLOW_ALERTS=1; $(SCENARIO_GO) -timeout 30m -v \
		-run 'TestScenarios/iptables/(readyrefusals|slowalerts)$$' ./scenarios

test-lab-all: build lab-bins
	export NETDRIFT_ROLLOUT10=1; $(SCENARIO_GO) -timeout 100m -v ./scenarios

# Ten rollouts without preStop (issue 15): every run's counted terminating-pod
# refusals equal the clients' refused connections within ±1; the table goes to
# lab/.cache/rollout10.txt.
test-lab-rollout10: build lab-bins
	export NETDRIFT_ROLLOUT10=1 NETDRIFT_ROLLOUT10_OUT=$(CURDIR)/$(LAB_DIR)/.cache/rollout10.txt; $(SCENARIO_GO) -timeout 40m -v \
		-run 'TestScenarios/iptables/rollout10$$' ./scenarios

# make bench-reports (root; not part of make test): BENCHMARKS.md "Node reports". A
# one-node lab without agents, the NodeReport CRD, 5,000 simulated reports written at the
# write policy's rollout rates and as fast as 16 writers go, kube-apiserver and etcd CPU and
# RSS from /proc, LISTs of all 5,000. The table goes to $(BENCH_REPORTS_OUT).
BENCH_REPORTS_OUT ?= $(CURDIR)/bin/bench-reports.md
bench-reports: lab-bins
	@test "$$(id -u)" = 0 || { echo "make bench-reports needs root (network namespaces)"; exit 1; }
	mkdir -p $(dir $(BENCH_REPORTS_OUT))
	export NETDRIFT_BENCH_REPORTS=1 BENCH_REPORTS_OUT=$(BENCH_REPORTS_OUT); cd $(LAB_DIR) && CGO_ENABLED=0 $(GO) test $(LAB_GOFLAGS) \
		-count=1 -timeout 30m -v -run 'TestBenchReports$$' ./bench
