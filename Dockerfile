# netdrift agent image. Build: make image [IMAGE=<registry>/netdrift:<tag>] (podman, buildah or
# docker; see docs/install.md), or plainly: docker build -t netdrift .
#
# Stage 1 builds a static binary; stage 2 carries only what the agent runs besides itself:
# iptables-legacy-save / iptables-nft-save (and the ip6tables ones) from Debian's iptables
# package, and nft from nftables, as kube-proxy's own image does. Conntrack, IPVS, routes and
# links are read over netlink by the binary itself: no conntrack/ipvsadm/iproute2 tools.

ARG GO_VERSION=1.26
ARG DEBIAN_RELEASE=trixie

FROM golang:${GO_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY go.mod go.sum ./
# Secret "ca" (optional): a CA bundle for fetching modules where the build machine's TLS is
# intercepted (make image passes the host's). Module and build caches persist across builds.
RUN --mount=type=secret,id=ca --mount=type=cache,target=/go/pkg/mod \
    if [ -s /run/secrets/ca ]; then export SSL_CERT_FILE=/run/secrets/ca; fi; \
    go mod download
COPY cmd ./cmd
COPY internal ./internal
COPY bpf ./bpf
ARG VERSION=dev
ARG COMMIT=unknown
ARG BUILD_DATE=unknown
# The CA secret again: when the download layer above is reused from an earlier build but the
# module cache mount is gone (pruned, another storage), go build fetches the modules itself.
RUN --mount=type=secret,id=ca --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    if [ -s /run/secrets/ca ]; then export SSL_CERT_FILE=/run/secrets/ca; fi; \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.buildDate=${BUILD_DATE}" \
      -o /out/netdrift ./cmd/agent

# A newer iptables/nft than the node's kube-proxy wrote with reads its rules; an older one
# may not ("unsupported revision"), so the runtime follows a current Debian release.
FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables nftables \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log
COPY --from=build /out/netdrift /usr/local/bin/netdrift
# uid 0, deliberately: the DaemonSet drops every capability but NET_ADMIN, NET_RAW, BPF and
# PERFMON, and Kubernetes hands added capabilities to a non-root container only in its
# bounding set, so a non-root agent (and the iptables-save it runs) would hold none of them.
# See docs/install.md ("Capabilities").
USER 0:0
ENTRYPOINT ["/usr/local/bin/netdrift"]
CMD ["agent"]
