package labenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

const netnsDir = "/run/netns"

// ipCmd runs "ip <args>" and returns a clear error with ip's output.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// ipBatch runs several ip commands inside namespace ns in one exec.
func ipBatch(ns string, lines ...string) error {
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -n %s -batch: %v: %s\ncommands:\n%s", ns, err, bytes.TrimSpace(out), strings.Join(lines, "\n"))
	}
	return nil
}

// nsExec runs a command inside a named namespace and returns its output.
func nsExec(ns string, name string, args ...string) ([]byte, error) {
	full := append([]string{"netns", "exec", ns, name}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ip netns exec %s %s %s: %v: %s", ns, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

func addNetns(name string) error { return ipCmd("netns", "add", name) }

// delNetns removes a named namespace; a missing one is not an error.
func delNetns(name string) error {
	if _, err := os.Stat(netnsDir + "/" + name); os.IsNotExist(err) {
		return nil
	}
	return ipCmd("netns", "del", name)
}

// listNetns returns the named namespaces starting with prefix.
func listNetns(prefix string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// inNetns runs fn on an OS thread switched into namespace ns. Sockets
// created by fn belong to ns for their whole life. If the thread cannot be
// switched back it is left locked so the runtime discards it.
func inNetns(ns string, fn func() error) error {
	target, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("netns %s: %w", ns, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("restore netns: %w", err) // thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// DialContextIn returns a dial function whose sockets live in namespace ns.
func DialContextIn(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(ns, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// listenIn opens a TCP listener inside namespace ns.
func listenIn(ns, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(ns, func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}
