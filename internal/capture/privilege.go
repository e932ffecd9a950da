package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// Capabilities a live read needs: netlink dumps of nf_tables, IPVS,
// conntrack and the iptables-legacy getsockopt calls need CAP_NET_ADMIN;
// entering another network namespace (setns) needs CAP_SYS_ADMIN; loading
// the RST probe needs CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux
// 5.8).
const (
	liveCaps  = "CAP_NET_ADMIN"
	netnsCaps = "CAP_NET_ADMIN and CAP_SYS_ADMIN (setns into --netns)"
	probeCaps = "CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8)"
)

// IsPermission reports whether err comes from a refused privilege (EPERM,
// EACCES). Some netlink libraries format the errno into their message
// instead of wrapping it (setns while creating a netlink socket), so its
// text is recognised too.
func IsPermission(err error) bool {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, fs.ErrPermission) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.EPERM.Error()) || strings.Contains(msg, syscall.EACCES.Error())
}

// PermissionHint wraps a refused-privilege error of a live read with what
// to do: run as root, or with the capabilities it needs. Other errors are
// returned as they are.
func PermissionHint(err error, netns string) error {
	if err == nil || !IsPermission(err) {
		return err
	}
	caps := liveCaps
	if netns != "" {
		caps = netnsCaps
	}
	return fmt.Errorf("%w: reading the live datapath needs root, or %s", err, caps)
}

// ProbeHint wraps a refused-privilege error of loading the RST probe.
func ProbeHint(err error) error {
	if err == nil || !IsPermission(err) {
		return err
	}
	return fmt.Errorf("%w: the RST probe needs root, or %s", err, probeCaps)
}
