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
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS_VERSION)" -o $(BIN)/kubectl-netdrift ./cmd/kubectl-netdrift

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

# kubectl-netdrift's krew release: one tarball per KREW_PLATFORMS entry (os/arch; a release
# passes all four of deploy/krew/netdrift.yaml) in $(BIN)/krew, and $(BIN)/krew/netdrift.yaml,
# the manifest with their sha256 and KREW_VERSION (default v + the chart's appVersion).
KREW_PLATFORMS ?= linux/amd64
KREW_VERSION ?= v$(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' deploy/helm/netdrift/Chart.yaml)
.PHONY: krew-archive
krew-archive:
	@set -e; out=$(BIN)/krew; rm -rf $$out; mkdir -p $$out; \
	sed 's/@VERSION@/$(KREW_VERSION)/g' deploy/krew/netdrift.yaml > $$out/netdrift.yaml.tmp; \
	for p in $(KREW_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; stage=$$out/stage-$$os-$$arch; mkdir -p $$stage; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -ldflags "-X main.version=$(KREW_VERSION)" -o $$stage/kubectl-netdrift ./cmd/kubectl-netdrift; \
	  tgz=$$out/kubectl-netdrift_$${os}_$${arch}.tar.gz; \
	  tar -C $$stage --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - kubectl-netdrift | gzip -n > $$tgz; \
	  sum=$$(sha256sum $$tgz | cut -d' ' -f1); sed -i "s/@SHA256_$${os}_$${arch}@/$$sum/" $$out/netdrift.yaml.tmp; \
	  rm -rf $$stage; echo "$$tgz sha256 $$sum"; done; \
	mv $$out/netdrift.yaml.tmp $$out/netdrift.yaml; \
	if grep -q '@SHA256_' $$out/netdrift.yaml; then echo "$$out/netdrift.yaml: platforms not built keep their @SHA256_os_arch@ placeholder"; fi
