# Cilium's own load-balancer control plane (cilium-lb) and cilium-dbg, built
# from github.com/cilium/cilium v1.20.2 in a module of its own (lab/cilium:
# Cilium pulls k8s.io v0.36, the lab v0.37) into lab/.cache/bin. The first
# build compiles some 1,300 packages (tens of minutes on two cores); later
# builds are cached.
CILIUM_DIR := lab/cilium
CILIUM_BIN := $(CURDIR)/lab/.cache/bin

.PHONY: lab-cilium-bins

lab-cilium-bins:
	mkdir -p $(CILIUM_BIN)
	cd $(CILIUM_DIR) && CGO_ENABLED=0 $(GO) build -trimpath -o $(CILIUM_BIN)/cilium-lb ./cmd/cilium-lb
	cd $(CILIUM_DIR) && CGO_ENABLED=0 $(GO) build -trimpath -o $(CILIUM_BIN)/cilium-dbg github.com/cilium/cilium/cilium-dbg

.PHONY: test-lab-cilium

# The cilium scenarios (lab/scenarios/cilium_test.go): a 3-node lab whose
# nodes run Cilium's own load-balancer control plane instead of kube-proxy;
# then cilium#48050 (below) on a lab of its own.
test-lab-cilium: build lab-bins lab-cilium-bins lab-cilium119-bin
	cd $(LAB_DIR) && CGO_ENABLED=0 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift $(GO) test $(LAB_GOFLAGS) -count=1 -timeout 20m -v \
		-run 'TestParseCiliumBackends|TestCiliumScenarios|TestCilium48050' ./scenarios ./labenv

# cilium#48050 (Cilium <= 1.19.2: a backend that left an EndpointSlice while
# the agent's watch was down stays after the agent lists again): node-1 runs
# Cilium v1.19.1's control plane (module lab/cilium119; v1.19.2 is not
# served by the Go module proxy), node-2 v1.20.2's through the same
# sequence. Part of `make test` (test-lab-cilium); the v1.19.1 build is a
# second compilation of Cilium, cached after the first.
CILIUM119_DIR := lab/cilium119

.PHONY: lab-cilium119-bin test-lab-cilium-48050

lab-cilium119-bin:
	mkdir -p $(CILIUM_BIN)
	cd $(CILIUM119_DIR) && CGO_ENABLED=0 $(GO) build -trimpath -o $(CILIUM_BIN)/cilium-lb-1.19.1 ./cmd/cilium-lb

test-lab-cilium-48050: build lab-bins lab-cilium-bins lab-cilium119-bin
	cd $(LAB_DIR) && CGO_ENABLED=0 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift $(GO) test $(LAB_GOFLAGS) -count=1 -timeout 20m -v \
		-run 'TestCilium48050' ./scenarios
