package datapath

import (
	"fmt"
	"strings"

	"github.com/vishvananda/netns"
)

// withNetNSFd runs fn with a file descriptor of the named network namespace
// (a name under /run/netns, or a path such as /proc/PID/ns/net). An empty
// name passes fd 0, which netlink takes as the caller's namespace. The
// descriptor is closed when fn returns.
func withNetNSFd(name string, fn func(fd int) error) error {
	if name == "" {
		return fn(0)
	}
	var h netns.NsHandle
	var err error
	if strings.Contains(name, "/") {
		h, err = netns.GetFromPath(name)
	} else {
		h, err = netns.GetFromName(name)
	}
	if err != nil {
		return fmt.Errorf("network namespace %q: %w", name, err)
	}
	defer h.Close()
	return fn(int(h))
}
