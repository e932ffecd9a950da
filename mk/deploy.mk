# Deploy and operate targets; included from the top-level Makefile.
#   make image        build the agent image (needs docker or podman)
#   make test-deploy  promtool rule checks + the deploy/ and internal/authn tests
#   make test-deploy-lab  (root) manifests dry-run + secure endpoint against the lab's kube-apiserver
#   make deploy-rules regenerate deploy/prometheus-rules.yaml from deploy/prometheus/netdrift.rules.yml
GO ?= go
IMAGE ?= netdrift/netdrift:dev
CONTAINER_ENGINE ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)

.PHONY: image test-deploy test-deploy-lab deploy-rules

image:
	@if [ -z "$(CONTAINER_ENGINE)" ] || ! $(CONTAINER_ENGINE) info >/dev/null 2>&1; then \
	  echo "make image: needs a running container engine (docker or podman, or CONTAINER_ENGINE=...)." >&2; \
	  echo "None is available on this machine; the Dockerfile is not built here." >&2; exit 1; fi
	$(CONTAINER_ENGINE) build -t $(IMAGE) .

# promtool comes with the Debian package prometheus.
test-deploy:
	promtool check rules deploy/prometheus/netdrift.rules.yml
	promtool test rules deploy/tests/*.test.yml
	CGO_ENABLED=1 $(GO) test -race -count=1 ./deploy/... ./internal/authn/...

# Brings up a one-node lab (lab/, builds the Kubernetes binaries on first use).
test-deploy-lab:
	CGO_ENABLED=1 $(GO) test -tags lab -race -count=1 -timeout 30m -run Lab -v ./deploy/

deploy-rules:
	$(GO) test ./deploy -run TestPrometheusRuleMatchesPlainFile -update
