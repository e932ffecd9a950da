package capture

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

func TestPermissionHint(t *testing.T) {
	wrapped := fmt.Errorf("open nf_tables socket: %w", syscall.EPERM)
	formatted := errors.New("rtnetlink: failed to set into network namespace 5 while creating netlink socket: operation not permitted")
	other := errors.New("no such network namespace")
	for _, c := range []struct {
		err   error
		netns string
		want  string // "" unchanged
	}{
		{wrapped, "", "needs root, or CAP_NET_ADMIN"},
		{wrapped, "ns1", "needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN (setns into --netns)"},
		{formatted, "ns1", "CAP_SYS_ADMIN (setns into --netns)"},
		{fmt.Errorf("read: %w", syscall.EACCES), "", "needs root"},
		{other, "ns1", ""},
	} {
		got := PermissionHint(c.err, c.netns)
		if c.want == "" {
			if got != c.err {
				t.Errorf("%v: changed to %v", c.err, got)
			}
			continue
		}
		if !strings.Contains(got.Error(), c.want) || !strings.HasPrefix(got.Error(), c.err.Error()) {
			t.Errorf("%v: got %v, want it followed by %q", c.err, got, c.want)
		}
		if errors.Is(c.err, syscall.EPERM) && !errors.Is(got, syscall.EPERM) {
			t.Errorf("%v: the hint lost the errno", c.err)
		}
	}
	if PermissionHint(nil, "x") != nil || ProbeHint(nil) != nil {
		t.Error("nil error changed")
	}
	if got := ProbeHint(fmt.Errorf("load: %w", syscall.EPERM)); !strings.Contains(got.Error(), "CAP_BPF and CAP_PERFMON") {
		t.Errorf("probe hint: %v", got)
	}
}
