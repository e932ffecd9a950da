# make demo: a 3-node lab (kube-proxy iptables mode) with one netdrift agent
# per node, and a narrated story printed with netdrift's own tables. The lab
# stays up afterwards; `make demo-down` removes it (the demo removes it
# itself on failure or Ctrl-C). Needs root.
#
# make test-lab: the lab scenarios CI runs (rollout and frozen kube-proxy in
# iptables mode, frozen kube-proxy in nftables mode) plus the scenario
# helpers' unit tests. make test-lab-all: every scenario in both modes.
DEMO_NAME ?= demo
SCENARIO_GO := cd $(LAB_DIR) && CGO_ENABLED=0 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift $(GO) test $(LAB_GOFLAGS) -count=1

.PHONY: demo demo-down test-lab test-lab-all

demo: deps build lab-bins
	$(LAB_RUN) demo -name $(DEMO_NAME) -agent $(CURDIR)/$(BIN)/netdrift

demo-down:
	$(LAB_RUN) down -name $(DEMO_NAME)

test-lab: build lab-bins
	$(SCENARIO_GO) -timeout 30m -v \
		-run 'TestParse|TestMatch|TestQuantile|TestNormalize|TestScenarios/(iptables|nftables)/(rollout|frozen)$$' \
		-skip 'TestScenarios/nftables/rollout$$' ./scenarios

test-lab-all: build lab-bins
	$(SCENARIO_GO) -timeout 75m -v ./scenarios
