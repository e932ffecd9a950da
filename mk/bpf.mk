# bpf.mk: the RST probe's eBPF objects (bpf/). Included by the top Makefile.
#   make generate        rebuild bpf/probe_bpfel.{go,o} from bpf/rst.c (bpf2go + clang)
#   make check-generate  regenerate and fail if the committed files differ (CI)
# The output depends on the clang version: CI and developers use Debian
# bookworm's clang (14); regenerate with the same toolchain.

GO ?= go
BPF_DIR := bpf
BPF_DEB_PKGS := clang llvm libbpf-dev

.PHONY: generate check-generate bpf-deps

bpf-deps:
	@missing=""; for p in $(BPF_DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

generate: bpf-deps
	cd $(BPF_DIR) && $(GO) generate ./...

check-generate: generate
	@if ! git diff --quiet -- $(BPF_DIR) || [ -n "$$(git ls-files --others --exclude-standard -- $(BPF_DIR))" ]; then \
	  git status --short -- $(BPF_DIR); git diff --stat -- $(BPF_DIR); \
	  echo "check-generate: $(BPF_DIR)/ generated files are out of date: run 'make generate' and commit them"; exit 1; \
	fi
	@echo "check-generate: $(BPF_DIR)/ is up to date"
