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
# nodes run Cilium's own load-balancer control plane instead of kube-proxy.
test-lab-cilium: build lab-bins lab-cilium-bins
	cd $(LAB_DIR) && CGO_ENABLED=0 NETDRIFT_BIN=$(CURDIR)/$(BIN)/netdrift $(GO) test $(LAB_GOFLAGS) -count=1 -timeout 20m -v \
		-run 'TestParseCiliumBackends|TestCiliumScenarios' ./scenarios ./labenv
