# Real-kernel tests in a VM: Debian's packaged kernel (linux-image-amd64) in
# qemu, see internal/vmtest. Included from the Makefile.
#
#   make vm-deps     install the Debian packages the VM harness needs
#   make vm-kernel   download and unpack the kernel into .cache/vm (first run only)
#   make test-vm     run every test that boots the VM
#
# Environment: NETDRIFT_VM_ACCEL=kvm|tcg forces an accelerator (default: KVM
# when it boots, else TCG); NETDRIFT_VM_VERBOSE=1 logs the kernel console;
# NETDRIFT_VM_KEEP=DIR keeps the initramfs and logs; NETDRIFT_VM_KERNEL_REFRESH=1
# looks for a newer kernel package.

VM_DEB_PKGS := qemu-system-x86 busybox-static kmod xz-utils ipvsadm ipset iptables nftables iproute2 conntrack
VM_CACHE := .cache/vm
# Packages whose tests boot the VM, and the host-side tests that do it.
VM_TEST_PKGS := ./internal/vmtest ./internal/ipvs
VM_TEST_RUN := 'InVM$$|^TestVMBoots$$'

.PHONY: vm-deps vm-kernel test-vm

vm-deps:
	@missing=""; for p in $(VM_DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

vm-kernel: vm-deps
	bash vm/fetch-kernel.sh $(VM_CACHE)

test-vm: vm-kernel
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 20m -v -run $(VM_TEST_RUN) $(VM_TEST_PKGS)
