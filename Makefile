# netdrift — see README.md. Targets install what they need (Debian packages, Go modules).
SHELL := /bin/bash
GO ?= go
BIN := bin
export PATH := $(PATH):/usr/local/go/bin:/usr/sbin:/sbin
DEB_PKGS := iptables nftables iproute2 conntrack kmod clang llvm libbpf-dev prometheus \
	qemu-system-x86 busybox-static xz-utils ipvsadm ipset procps util-linux chromium

.PHONY: all build test test-go test-unit lint deps clean

all: build

# The version, commit and build date `netdrift version` prints.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS_VERSION = -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS_VERSION)" -o $(BIN)/netdrift ./cmd/agent

deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	$(GO) mod download

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal bpf deploy bench lab 2>/dev/null)" || { gofmt -l cmd internal bpf deploy bench lab; echo "gofmt needed"; exit 1; }

# Everything: lint, generated-code check, unit/golden/fuzz-seed tests, real-kernel
# tests (root, throwaway network namespaces), the VM (Debian 6.1 kernel) tests,
# promtool rule tests, the lab scenarios (real control plane + kube-proxy) and
# the live benchmark's correctness variant (test-bench-live-quick, ~2 min).
test: deps image-deps build lint check-generate vm-kernel test-go test-deploy-rules helm-lint test-lab test-lab-cilium test-deploy-lab test-image test-bench-live-quick

# The product module under the race detector (includes the VM tests when the
# kernel is cached: `make vm-kernel`).
test-go:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 45m ./...

test-unit:
	$(GO) test -count=1 -short ./...

test-deploy-rules:
	promtool check rules deploy/prometheus/netdrift.rules.yml
	promtool test rules deploy/tests/*.test.yml

clean:
	rm -rf $(BIN)

include mk/bpf.mk mk/vm.mk mk/deploy.mk mk/image.mk mk/lab.mk mk/demo.mk mk/bench.mk mk/cilium.mk
