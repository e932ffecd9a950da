package labenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Down removes a lab from any process: it asks the recorded runner to stop
// (SIGTERM, up to 60 s), stops every recorded process that is still alive
// (by PID and start time), then deletes every ndlab-<name>-* namespace and the
// lab directory.
func Down(name, dir string) error {
	if dir == "" {
		dir = DefaultDir(name)
	}
	var errs []error
	if s, err := ReadState(dir); err == nil {
		if s.Runner.Alive() {
			_ = syscall.Kill(s.Runner.PID, syscall.SIGTERM)
			for i := 0; i < 600 && s.Runner.Alive(); i++ {
				time.Sleep(100 * time.Millisecond)
			}
			if s.Runner.Alive() {
				errs = append(errs, errors.New("runner did not stop in 60s; killing what it started"))
			}
		}
		for i := len(s.Procs) - 1; i >= 0; i-- {
			s.Procs[i].stop(5 * time.Second)
		}
		if s.Runner.Alive() {
			s.Runner.stop(time.Second)
		}
	} else if !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	errs = append(errs, cleanupLab(name, dir))
	return errors.Join(errs...)
}

// Leftovers lists what remains of a lab: namespaces, live recorded
// processes and the directory. Empty means fully cleaned up.
func Leftovers(name, dir string) []string {
	var out []string
	ns, _ := listNetns(nsPrefix(name))
	for _, n := range ns {
		out = append(out, "netns "+n)
	}
	if s, err := ReadState(dir); err == nil {
		for _, p := range append(s.Procs, s.Runner) {
			if p.Alive() {
				out = append(out, "process "+p.Name)
			}
		}
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "dir "+dir)
	}
	return out
}

// ServeHostAPI forwards a host-loopback port to the API server inside the
// router namespace, writes <dir>/kubeconfig-host pointing at it, and
// returns the address. It stops when ctx ends.
func (l *Lab) ServeHostAPI(ctx context.Context) (string, error) {
	addr, err := l.forwardFromHost(ctx, net.JoinHostPort(routerIP, "6443"))
	if err != nil {
		return "", err
	}
	if err := writeKubeconfig(l.HostKubeconfig(), "https://"+addr, l.pki); err != nil {
		return "", err
	}
	return addr, l.SetHostAPI(addr)
}

// ServeHostPrometheus forwards a host-loopback port to the lab's Prometheus
// (its web UI and HTTP API) and returns the address. It stops when ctx ends.
func (l *Lab) ServeHostPrometheus(ctx context.Context) (string, error) {
	if !l.opts.Prometheus {
		return "", fmt.Errorf("lab started without Options.Prometheus")
	}
	addr, err := l.forwardFromHost(ctx, l.prometheusAddr())
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	l.state.HostPrometheus = addr
	l.mu.Unlock()
	return addr, l.saveState()
}

// forwardFromHost listens on a free host-loopback port and copies every
// connection to target, dialled inside the router namespace.
func (l *Lab) forwardFromHost(ctx context.Context, target string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { <-ctx.Done(); ln.Close() }()
	dial := DialContextIn(routerNS(l.opts.Name))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := dial(ctx, "tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String(), nil
}

// HostKubeconfig is the kubeconfig for host tools while ServeHostAPI runs.
func (l *Lab) HostKubeconfig() string { return filepath.Join(l.opts.Dir, "kubeconfig-host") }
