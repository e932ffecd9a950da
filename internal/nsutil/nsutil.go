// Package nsutil names and opens network namespaces for the kernel readers
// (internal/datapath and its source packages, internal/ipvs). A namespace is
// given as a name under /run/netns, a path (such as /proc/PID/ns/net), or ""
// for the caller's own. It imports nothing of netdrift. See docs/architecture.md.
package nsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/vishvananda/netns"
)

// Path turns a namespace name into the path netlink libraries want ("" stays "").
func Path(ns string) string {
	if ns == "" || strings.Contains(ns, "/") {
		return ns
	}
	return filepath.Join("/run/netns", ns)
}

// Open opens a namespace by name, by path, or the caller's own (""). The
// caller closes the handle.
func Open(ns string) (netns.NsHandle, error) {
	var h netns.NsHandle
	var err error
	switch {
	case ns == "":
		h, err = netns.Get()
	case strings.Contains(ns, "/"):
		h, err = netns.GetFromPath(ns)
	default:
		h, err = netns.GetFromName(ns)
	}
	if err != nil {
		return netns.None(), fmt.Errorf("network namespace %q: %w", ns, err)
	}
	return h, nil
}

// WithFd runs fn with a file descriptor of the namespace. An empty name
// passes fd 0, which netlink takes as the caller's namespace. The descriptor
// is closed when fn returns.
func WithFd(ns string, fn func(fd int) error) error {
	if ns == "" {
		return fn(0)
	}
	h, err := Open(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(int(h))
}

// ReadProcNet reads /proc/net/<file> as seen from the namespace. It switches
// a dedicated, locked OS thread into the namespace; the thread is discarded
// afterwards (the goroutine exits still locked).
func ReadProcNet(ns, file string) (string, error) {
	if ns == "" {
		b, err := os.ReadFile("/proc/net/" + file)
		return string(b), err
	}
	type result struct {
		data string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		h, err := Open(ns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{err: err}
			return
		}
		b, err := os.ReadFile("/proc/thread-self/net/" + file)
		ch <- result{string(b), err}
	}()
	r := <-ch
	return r.data, r.err
}

// Socket opens a socket inside the namespace ("" = the caller's own): a
// socket belongs to the namespace it was created in for its whole life, so
// only its creation needs the namespace. Like ReadProcNet, it switches a
// dedicated, locked OS thread, which is discarded afterwards. The caller
// closes the descriptor.
func Socket(ns string, domain, typ, proto int) (int, error) {
	if ns == "" {
		return syscall.Socket(domain, typ|syscall.SOCK_CLOEXEC, proto)
	}
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		h, err := Open(ns)
		if err != nil {
			ch <- result{-1, err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{-1, fmt.Errorf("enter network namespace %q: %w", ns, err)}
			return
		}
		fd, err := syscall.Socket(domain, typ|syscall.SOCK_CLOEXEC, proto)
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}
