#!/bin/bash
# Fetch Debian's packaged kernel (linux-image-amd64 -> linux-image-6.1.*) into a
# cache directory, unpack it and generate modules.dep, for the test VM
# (internal/vmtest). Idempotent: a finished cache is reused.
#
#   vm/fetch-kernel.sh [CACHE_DIR]      (default: .cache/vm)
#
# Prints the kernel directory (containing vmlinuz and lib/modules/VERSION) as
# the last line of its output.
set -euo pipefail

cache=${1:-.cache/vm}
meta=${NETDRIFT_VM_KERNEL_PKG:-linux-image-amd64}

for tool in apt-get apt-cache dpkg-deb depmod; do
	command -v "$tool" >/dev/null || { echo "fetch-kernel: $tool not found" >&2; exit 3; }
done

pkg_of_meta() {
	apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}

pkg=$(pkg_of_meta || true)
if [ -z "$pkg" ]; then
	echo "fetch-kernel: apt lists do not name the kernel for $meta; running apt-get update" >&2
	apt-get update -qq >&2
	pkg=$(pkg_of_meta || true)
fi
[ -n "$pkg" ] || { echo "fetch-kernel: no kernel package for $meta" >&2; exit 3; }

dir="$cache/$pkg"
if [ -f "$dir/.ready" ]; then
	echo "$(cd "$dir" && pwd)"
	exit 0
fi

start=$(date +%s)
rm -rf "$dir"
mkdir -p "$dir/dl"
(cd "$dir/dl" && apt-get download "$pkg" >&2)
deb=$(ls "$dir"/dl/*.deb)
dpkg-deb -x "$deb" "$dir/root"
version=$(ls "$dir/root/lib/modules")
depmod -b "$dir/root" "$version"
ln -sf "root/boot/vmlinuz-$version" "$dir/vmlinuz"
echo "$version" >"$dir/version"
size=$(du -sh "$deb" | cut -f1)
rm -rf "$dir/dl"
touch "$dir/.ready"
echo "fetch-kernel: $pkg ($version, package $size) ready in $(( $(date +%s) - start ))s" >&2
echo "$(cd "$dir" && pwd)"
