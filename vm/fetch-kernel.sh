#!/bin/bash
# Fetch Debian's packaged kernel (linux-image-amd64 -> linux-image-6.1.*) into a
# cache directory, unpack it and generate modules.dep, for the test VM
# (internal/vmtest). Idempotent: a finished cache is reused.
#
#   vm/fetch-kernel.sh [CACHE_DIR]      (default: .cache/vm)
#
# Prints the kernel directory (containing vmlinuz and lib/modules/VERSION) as
# the last line of its output. Exit status 3: the kernel package (or a tool
# to unpack it) is not available here.
set -euo pipefail

cache=${1:-.cache/vm}
meta=${NETDRIFT_VM_KERNEL_PKG:-linux-image-amd64}

for tool in apt-get apt-cache dpkg-deb depmod; do
	command -v "$tool" >/dev/null || { echo "fetch-kernel: $tool not found" >&2; exit 3; }
done


# extract_vmlinux unpacks the ELF kernel from the xz-compressed bzImage.
# qemu boots it directly through its PVH entry point, skipping the BIOS and
# the in-guest decompression (about 45 s under TCG emulation). Optional: the
# VM falls back to vmlinuz without it.
extract_vmlinux() {
	[ -f "$dir/vmlinux" ] && return 0
	command -v xz >/dev/null || { echo "fetch-kernel: no xz (package xz-utils): booting the compressed kernel" >&2; return 0; }
	local off
	off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$dir/vmlinuz" | head -1 | cut -d: -f1)
	[ -n "$off" ] || { echo "fetch-kernel: vmlinuz is not xz-compressed: booting it as is" >&2; return 0; }
	# xz stops after the first stream; tail may then die of SIGPIPE: ignore it.
	if { tail -c +$((off + 1)) "$dir/vmlinuz" || true; } | xz -dc --single-stream >"$dir/vmlinux.tmp" 2>/dev/null &&
		[ "$(head -c 4 "$dir/vmlinux.tmp" | od -An -c | tr -d ' ')" = "177ELF" ]; then
		mv "$dir/vmlinux.tmp" "$dir/vmlinux"
	else
		rm -f "$dir/vmlinux.tmp"
		echo "fetch-kernel: could not extract vmlinux: booting vmlinuz" >&2
	fi
}

# Fast path: reuse the kernel fetched before (apt-cache is slow), unless
# NETDRIFT_VM_KERNEL_REFRESH=1 asks to look for a newer package.
if [ -z "${NETDRIFT_VM_KERNEL_REFRESH:-}" ] && [ -f "$cache/current/.ready" ]; then
	dir=$(cd "$cache/current" && pwd -P)
	extract_vmlinux
	echo "$dir"
	exit 0
fi

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
	extract_vmlinux
	ln -sfn "$pkg" "$cache/current"
	echo "$(cd "$dir" && pwd)"
	exit 0
fi

start=$(date +%s)
rm -rf "$dir"
mkdir -p "$dir/dl"
(cd "$dir/dl" && apt-get download "$pkg" >&2) || { echo "fetch-kernel: cannot download $pkg" >&2; exit 3; }
deb=$(ls "$dir"/dl/*.deb)
dpkg-deb -x "$deb" "$dir/root"
version=$(ls "$dir/root/lib/modules")
depmod -b "$dir/root" "$version"
ln -sf "root/boot/vmlinuz-$version" "$dir/vmlinuz"
echo "$version" >"$dir/version"
size=$(du -sh "$deb" | cut -f1)
rm -rf "$dir/dl"
extract_vmlinux
touch "$dir/.ready"
ln -sfn "$pkg" "$cache/current"
echo "fetch-kernel: $pkg ($version, package $size) ready in $(( $(date +%s) - start ))s" >&2
echo "$(cd "$dir" && pwd)"
