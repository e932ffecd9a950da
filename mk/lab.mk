# The lab: real etcd, kube-apiserver, kube-controller-manager and kube-proxy
# (pinned, built from Go modules into lab/.cache/bin) with nodes and pods as
# network namespaces. lab/ is its own Go module. Targets need root except lab-bins.
LAB_DIR   ?= lab
LAB_NAME  ?= lab
LAB_NODES ?= 3
LAB_MODE  ?= iptables
# -trimpath and CGO_ENABLED=0 everywhere so the runner and tests reuse the
# packages compiled for the upstream binaries (one Kubernetes compile, not three).
LAB_GOFLAGS := -trimpath
LAB_RUN   := cd $(LAB_DIR) && CGO_ENABLED=0 $(GO) run $(LAB_GOFLAGS) ./cmd/lab

.PHONY: lab-bins lab-deps lab-up lab-up-agent lab-down lab-status test-lab-smoke test-lab-race lab-lint

# Build (or confirm up to date) the pinned upstream binaries, nodestream and
# kubectl (k8s.io/kubectl, for the docs scenario); prints progress.
lab-bins:
	$(LAB_RUN) build

# Debian packages the scenarios run besides the lab's binaries: jq (the
# docs scenario runs install.md's `kubectl get nodereports -o json | jq ...`).
LAB_DEB_PKGS := jq
lab-deps:
	@missing=""; for p in $(LAB_DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

# Bring up a lab in the background (the runner hosts the kubelet stand-in).
lab-up: lab-bins
	$(LAB_RUN) up -name $(LAB_NAME) -nodes $(LAB_NODES) -mode $(LAB_MODE)

# Same, with one netdrift agent per node (bin/netdrift from `make build`).
lab-up-agent: lab-bins build
	$(LAB_RUN) up -name $(LAB_NAME) -nodes $(LAB_NODES) -mode $(LAB_MODE) -agent $(CURDIR)/$(BIN)/netdrift

lab-down:
	$(LAB_RUN) down -name $(LAB_NAME)

lab-status:
	$(LAB_RUN) status -name $(LAB_NAME)

# labenv tests (about a minute): parsers, the namespace topology, the smoke
# test per kube-proxy mode (Service with 2 pods, rules on every node, a reply
# through the ClusterIP, a deleted pod's rule removed, full teardown asserted)
# and the lifecycle controls (preStop, freeze/thaw, API server stop/start,
# node deletion).
test-lab-smoke: lab-bins
	cd $(LAB_DIR) && CGO_ENABLED=0 $(GO) test $(LAB_GOFLAGS) -count=1 -timeout 20m -v ./labenv

# The same under the race detector (compiles the client libraries again, with -race).
test-lab-race: lab-bins
	cd $(LAB_DIR) && CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m -v ./labenv

lab-lint:
	cd $(LAB_DIR) && CGO_ENABLED=0 $(GO) vet ./labenv ./cmd/lab ./bench ./scenarios
	@test -z "$$(gofmt -l $(LAB_DIR))" || { gofmt -l $(LAB_DIR); echo "gofmt needed"; exit 1; }
