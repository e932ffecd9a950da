# The agent's image and its Helm chart; included from the top-level Makefile.
#   make image          build the image (podman or buildah; docker when its daemon answers), base
#                       images created locally when they cannot be pulled (mk/image.sh)
#   make test-image     (root) the image under podman + runc with the chart's DaemonSet settings, in
#                       a lab node's network namespace against the lab's API server and kube-proxy
#   make helm-lint      helm lint + helm template of deploy/helm/netdrift (helm built from its Go module)
#   make deploy-manifests  render deploy/daemonset.yaml from the chart
IMAGE_REPO ?= netdrift/netdrift
IMAGE_TAG  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE      ?= $(IMAGE_REPO):$(IMAGE_TAG)
IMAGE_DEB_PKGS := podman buildah runc mmdebstrap golang-github-containers-common
HELM_VERSION := v3.22.0
HELM := $(CURDIR)/.cache/tools/helm-$(HELM_VERSION)
HELM_TEMPLATE := $(HELM) template netdrift deploy/helm/netdrift --namespace netdrift --kube-version 1.37.2
export CONTAINERS_CONF ?= $(CURDIR)/mk/containers.conf

.PHONY: image image-deps helm helm-lint test-image deploy-manifests

image-deps:
	@missing=""; for p in $(IMAGE_DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

image: image-deps
	bash mk/image.sh $(IMAGE)

$(HELM):
	@mkdir -p $(dir $(HELM))
	@echo "building helm $(HELM_VERSION) from its Go module (first time only)"
	tmp=$$(mktemp -d) && GOBIN=$$tmp CGO_ENABLED=0 $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) && mv $$tmp/helm $(HELM) && rmdir $$tmp

helm: $(HELM)

helm-lint: $(HELM)
	$(HELM) lint --strict deploy/helm/netdrift
	$(HELM) lint --strict deploy/helm/netdrift -f deploy/helm/plain-values.yaml
	$(HELM_TEMPLATE) >/dev/null
	$(HELM_TEMPLATE) --set serviceMonitor.enabled=true,prometheusRule.enabled=true,secureEndpoint.tlsSecretName=tls >/dev/null
	$(HELM_TEMPLATE) --set secureEndpoint.enabled=false,seccompProfile.type=RuntimeDefault >/dev/null
	NETDRIFT_HELM=$(HELM) CGO_ENABLED=0 $(GO) test -count=1 -run 'Chart|Kustomization|Seccomp' ./deploy/
	cd deploy/tools && $(GO) vet ./... && test -z "$$(gofmt -l .)"

deploy-manifests: $(HELM)
	NETDRIFT_HELM=$(HELM) $(GO) test ./deploy -run 'TestChartRendersThePlainManifests' -update

test-image: image $(HELM) lab-bins
	@test "$$(id -u)" = 0 || { echo "make test-image needs root (network namespaces, the lab, podman)"; exit 1; }
	cd $(LAB_DIR) && NETDRIFT_IMAGE=$(IMAGE) NETDRIFT_HELM=$(HELM) CGO_ENABLED=0 $(GO) test $(LAB_GOFLAGS) -count=1 -timeout 20m -v -run 'TestImage$$|TestTranslate' ./imagetest

# The stretch: a lab node run by a real kubelet (from the lab module's Kubernetes version; built
# with a throwaway copy of lab/go.mod, so the lab module does not depend on the kubelet's extra
# modules) and a real containerd (from its Go module), runc from Debian.
CONTAINERD_VERSION := v2.4.2
KUBELET_BINS = $(CURDIR)/$(LAB_DIR)/.cache/bin
.PHONY: lab-kubelet-bins test-image-kubelet

lab-kubelet-bins:
	@test -x $(KUBELET_BINS)/containerd -a -x $(KUBELET_BINS)/ctr -a -x $(KUBELET_BINS)/containerd-shim-runc-v2 || \
	  GOBIN=$(KUBELET_BINS) CGO_ENABLED=0 $(GO) install -trimpath \
	    github.com/containerd/containerd/v2/cmd/containerd@$(CONTAINERD_VERSION) \
	    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$(CONTAINERD_VERSION) \
	    github.com/containerd/containerd/v2/cmd/ctr@$(CONTAINERD_VERSION)
	@cd $(LAB_DIR) && k8s=$$(sed -n 's/^\tk8s.io\/kubernetes \(v[^ ]*\)$$/\1/p' go.mod) && \
	  stamp="$$k8s $$($(GO) env GOVERSION)" && \
	  if [ -x $(KUBELET_BINS)/kubelet ] && [ "$$(cat $(KUBELET_BINS)/kubelet.inputs 2>/dev/null)" = "$$stamp" ]; then \
	    echo "kubelet $$k8s up to date"; else \
	  echo "building kubelet $$k8s" && tmp=$$(mktemp -d) && cp go.mod $$tmp/k.mod && cp go.sum $$tmp/k.sum && \
	  CGO_ENABLED=0 $(GO) get -modfile=$$tmp/k.mod k8s.io/kubernetes/cmd/kubelet@$$k8s && \
	  CGO_ENABLED=0 $(GO) build -modfile=$$tmp/k.mod -trimpath -o $(KUBELET_BINS)/kubelet k8s.io/kubernetes/cmd/kubelet && \
	  echo "$$stamp" > $(KUBELET_BINS)/kubelet.inputs && rm -rf $$tmp; fi

test-image-kubelet: image $(HELM) lab-bins lab-kubelet-bins
	@test "$$(id -u)" = 0 || { echo "make test-image-kubelet needs root"; exit 1; }
	cd $(LAB_DIR) && NETDRIFT_IMAGE=$(IMAGE) NETDRIFT_HELM=$(HELM) NETDRIFT_KUBELET_BINS=$(KUBELET_BINS) CGO_ENABLED=0 \
	  $(GO) test $(LAB_GOFLAGS) -count=1 -timeout 20m -v -run TestImageUnderKubelet ./imagetest
