# netdrift — see README.md. Targets install what they need (Debian packages, Go modules).
SHELL := /bin/bash
GO ?= go
BIN := bin
export CGO_ENABLED ?= 0
DEB_PKGS := iptables nftables iproute2 conntrack kmod

.PHONY: all build test test-unit lint deps generate demo demo-down test-lab test-vm bench image clean

all: build

build:
	$(GO) build -o $(BIN)/netdrift ./cmd/agent

deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	$(GO) mod download

# All tests: unit, golden, fuzz seeds, real-kernel (root, in throwaway netns).
test: deps build
	$(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal bpf 2>/dev/null)" || { gofmt -l cmd internal bpf; echo "gofmt needed"; exit 1; }
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m ./...

test-unit:
	$(GO) test -count=1 ./...

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal bpf 2>/dev/null)" || { gofmt -l cmd internal bpf; exit 1; }

clean:
	rm -rf $(BIN)
