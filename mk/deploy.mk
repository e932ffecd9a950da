# Deploy and operate targets; included from the top-level Makefile.
#   (make image, make test-image, the Helm chart: mk/image.mk)
#   make test-deploy  promtool rule checks + the deploy/ and internal/authn tests
#   make test-deploy-lab  (root) manifests dry-run + secure endpoint against the lab's kube-apiserver
#   make mixin        render deploy/mixin (alerts, dashboard) into the rules files, the
#                     PrometheusRule, the dashboard JSON and the chart's copies (deploy-rules: the same)
GO ?= go

.PHONY: test-deploy test-deploy-lab deploy-rules mixin

# promtool comes with the Debian package prometheus.
test-deploy:
	promtool check rules deploy/prometheus/netdrift.rules.yml
	promtool test rules deploy/tests/*.test.yml
	CGO_ENABLED=1 $(GO) test -race -count=1 ./deploy/... ./internal/authn/...

# Brings up a one-node lab (lab/, builds the Kubernetes binaries on first use).
test-deploy-lab:
	CGO_ENABLED=1 $(GO) test -tags lab -race -count=1 -timeout 30m -run Lab -v ./deploy/

mixin deploy-rules:
	cd deploy/tools && $(GO) run ./mixingen -mixin ../mixin -out ..
