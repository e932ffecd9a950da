#!/usr/bin/env bash
# make image: build the agent image from the Dockerfile with the first container engine that
# works here (docker only when its daemon answers, then podman, then buildah). Usage:
#
#   mk/image.sh IMAGE            e.g. netdrift/netdrift:v0.1.0-12-gabcdef0
#
# With podman or buildah, when a base image of the Dockerfile (golang:$GO_VERSION-$DEBIAN_RELEASE,
# debian:$DEBIAN_RELEASE-slim) is neither present nor pullable, it is created locally under the
# same name from Debian's packages (mmdebstrap; the golang one seeded with this machine's Go
# toolchain), so the Dockerfile stays the one a docker user builds. Environment:
#   CONTAINER_ENGINE   force docker|podman|buildah (or a path)
#   NETDRIFT_PULL=0    do not try to pull the base images before creating them
#   NETDRIFT_CA_FILE   CA bundle handed to the build as secret "ca" (default: the host's, when
#                      present); the Dockerfile uses it only to fetch Go modules
set -euo pipefail

image=${1:?usage: mk/image.sh IMAGE}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

arg() { sed -n "s/^ARG $1=//p" Dockerfile | head -1; }
GO_VERSION=${GO_VERSION:-$(arg GO_VERSION)}
DEBIAN_RELEASE=${DEBIAN_RELEASE:-$(arg DEBIAN_RELEASE)}
GO_BASE="golang:${GO_VERSION}-${DEBIAN_RELEASE}"
DEBIAN_BASE="debian:${DEBIAN_RELEASE}-slim"

log() { echo "make image: $*" >&2; }
die() { log "$*"; exit 1; }

pick_engine() {
	if [ -n "${CONTAINER_ENGINE:-}" ]; then
		command -v "$CONTAINER_ENGINE" >/dev/null || die "CONTAINER_ENGINE=$CONTAINER_ENGINE not found"
		echo "$CONTAINER_ENGINE"
		return
	fi
	# A docker client without a daemon is common (and here): only a docker that answers.
	if command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1; then
		echo docker
		return
	fi
	for e in podman buildah; do
		if command -v "$e" >/dev/null; then
			echo "$e"
			return
		fi
	done
	die "no container engine: install podman (apt-get install podman buildah runc), or start docker's daemon"
}

engine=$(pick_engine)
engine_name=$(basename "$engine")
log "engine: $engine_name ($("$engine" --version 2>/dev/null | head -1))"

case "$engine_name" in
podman | buildah)
	# This repository's containers.conf (runc, no default ulimits: see the file) unless the
	# caller brings one.
	export CONTAINERS_CONF=${CONTAINERS_CONF:-$top/mk/containers.conf}
	;;
esac

exists() {
	case "$engine_name" in
	podman) podman image exists "$1" ;;
	buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
	*) "$engine" image inspect "$1" >/dev/null 2>&1 ;;
	esac
}

# qualified NAME: the name a pull from Docker Hub would have given (debian:x -> docker.io/library/debian:x),
# so the Dockerfile's FROM finds the local image without any short-name lookup.
qualified() {
	case "$1" in
	*/*) echo "docker.io/$1" ;;
	*) echo "docker.io/library/$1" ;;
	esac
}

import() { # import NAME TARBALL CHANGES...
	local name=$1 tar=$2
	shift 2
	local changes=()
	for c in "$@"; do changes+=(--change "$c"); done
	case "$engine_name" in
	buildah) # buildah has no import: a podman beside it shares its storage
		command -v podman >/dev/null || die "creating $name needs podman (podman import)"
		podman import "${changes[@]}" "$tar" "$name" >/dev/null ;;
	*) "$engine" import "${changes[@]}" "$tar" "$name" >/dev/null ;;
	esac
}

need_mmdebstrap() {
	command -v mmdebstrap >/dev/null && return
	log "installing mmdebstrap (Debian package) to create base images"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
}

# The same trimming as Debian's -slim images: no manuals, docs or translations.
SLIM_OPTS=(
	--dpkgopt='path-exclude=/usr/share/man/*'
	--dpkgopt='path-exclude=/usr/share/doc/*'
	--dpkgopt='path-include=/usr/share/doc/*/copyright'
	--dpkgopt='path-exclude=/usr/share/info/*'
	--dpkgopt='path-exclude=/usr/share/locale/*'
	--dpkgopt='path-exclude=/usr/share/lintian/*'
)

create_debian() {
	need_mmdebstrap
	local tmp
	tmp=$(mktemp -d)
	log "creating $DEBIAN_BASE from Debian's packages (mmdebstrap --variant=minbase $DEBIAN_RELEASE)"
	mmdebstrap --quiet --variant=minbase "${SLIM_OPTS[@]}" "$DEBIAN_RELEASE" "$tmp/rootfs.tar"
	import "$(qualified "$DEBIAN_BASE")" "$tmp/rootfs.tar" 'CMD ["bash"]' \
		'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	rm -rf "$tmp"
}

create_golang() {
	need_mmdebstrap
	local goroot=${GOROOT_SEED:-$(go env GOROOT 2>/dev/null || echo /usr/local/go)}
	local have
	have=$("$goroot/bin/go" env GOVERSION 2>/dev/null) || die "creating $GO_BASE needs a Go toolchain on this machine (GOROOT_SEED)"
	case "$have" in
	go"$GO_VERSION" | go"$GO_VERSION".*) ;;
	*) die "creating $GO_BASE: this machine's Go is $have, not $GO_VERSION (set GOROOT_SEED or GO_VERSION)" ;;
	esac
	local tmp
	tmp=$(mktemp -d)
	log "creating $GO_BASE from Debian's packages and this machine's $have ($goroot)"
	mmdebstrap --quiet --variant=minbase --include=ca-certificates,git "${SLIM_OPTS[@]}" \
		--customize-hook="mkdir -p \"\$1/usr/local/go\" \"\$1/go/bin\" \"\$1/go/src\" && cp -a '$goroot'/. \"\$1/usr/local/go/\"" \
		"$DEBIAN_RELEASE" "$tmp/rootfs.tar"
	import "$(qualified "$GO_BASE")" "$tmp/rootfs.tar" 'CMD ["bash"]' 'WORKDIR /go' 'ENV GOPATH=/go' \
		"ENV GOLANG_VERSION=${have#go}" 'ENV GOTOOLCHAIN=local' \
		'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	rm -rf "$tmp"
}

ensure_base() { # ensure_base NAME CREATE-FUNCTION
	local name=$1 create=$2
	if exists "$name"; then
		log "base image $name: present"
		return
	fi
	if [ "${NETDRIFT_PULL:-1}" != 0 ] && timeout 60 "$engine" pull "$name" >/dev/null 2>&1; then
		log "base image $name: pulled"
		return
	fi
	[ "$engine_name" = docker ] && die "base image $name cannot be pulled (and is created locally only with podman/buildah)"
	log "base image $name: cannot be pulled"
	"$create"
	exists "$name" || die "base image $name was not created"
	log "base image $name: created locally"
}

ensure_base "$DEBIAN_BASE" create_debian
ensure_base "$GO_BASE" create_golang

build=(build -t "$image" --build-arg "GO_VERSION=$GO_VERSION" --build-arg "DEBIAN_RELEASE=$DEBIAN_RELEASE"
	--build-arg "VERSION=${VERSION:-${image##*:}}"
	--build-arg "COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
	--build-arg "BUILD_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	--label "org.opencontainers.image.version=${image##*:}"
	--label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)")
ca=${NETDRIFT_CA_FILE:-/etc/ssl/certs/ca-certificates.crt}
if [ -f "$ca" ]; then
	build+=(--secret "id=ca,src=$ca")
fi
case "$engine_name" in
podman | buildah)
	# RUN steps in the host's network namespace: no bridge, no NAT rules on the host; the
	# base images are local, so no pull either.
	build+=(--network host --pull-never)
	[ "$engine_name" = buildah ] && build=(bud "${build[@]:1}")
	;;
docker) export DOCKER_BUILDKIT=1 ;;
esac

start=$(date +%s)
log "$engine_name ${build[*]} ."
"$engine" "${build[@]}" .
log "built $image in $(($(date +%s) - start)) s"

size() {
	case "$engine_name" in
	buildah) podman image inspect --format '{{.Size}}' "$1" 2>/dev/null || buildah inspect --type image --format '{{.ImageSize}}' "$1" 2>/dev/null ;;
	*) "$engine" image inspect --format '{{.Size}}' "$1" ;;
	esac
}
bytes=$(size "$image" || echo 0)
log "$image: $((bytes / 1024 / 1024)) MiB ($bytes bytes, uncompressed)"
