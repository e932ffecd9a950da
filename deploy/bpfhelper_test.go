package deploy_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// bpfHelperEnv makes the test binary act as the capability-restricted child of
// TestBPFProbeAttachesWithExactlyTheManifestCapabilities instead of running tests.
const bpfHelperEnv = "NETDRIFT_DEPLOY_BPF_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(bpfHelperEnv) != "" {
		os.Exit(bpfHelper())
	}
	os.Exit(m.Run())
}

// bpfHelper does what the RST probe needs from the kernel, with trivial programs, and
// prints one line per step: "ok <step>" or "fail <step>: <error>".
func bpfHelper() int {
	ret0 := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	attach := func(spec *ebpf.ProgramSpec, do func(*ebpf.Program) (link.Link, error)) error {
		prog, err := ebpf.NewProgram(spec)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		defer prog.Close()
		l, err := do(prog)
		if err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		return l.Close()
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"map", func() error {
			m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 16, ValueSize: 8, MaxEntries: 4096})
			if err != nil {
				return err
			}
			return m.Close()
		}},
		{"tracepoint", func() error {
			return attach(&ebpf.ProgramSpec{Type: ebpf.TracePoint, License: "GPL", Instructions: ret0},
				func(p *ebpf.Program) (link.Link, error) { return link.Tracepoint("tcp", "tcp_send_reset", p, nil) })
		}},
		{"kprobe", func() error {
			return attach(&ebpf.ProgramSpec{Type: ebpf.Kprobe, License: "GPL", Instructions: ret0},
				func(p *ebpf.Program) (link.Link, error) { return link.Kprobe("tcp_v4_send_reset", p, nil) })
		}},
		{"fentry", func() error {
			return attach(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry,
				AttachTo: "tcp_v4_send_reset", License: "GPL", Instructions: ret0},
				func(p *ebpf.Program) (link.Link, error) { return link.AttachTracing(link.TracingOptions{Program: p}) })
		}},
		{"socket-filter", func() error {
			// The change watcher's commit stamp (bpf/stamp.c): a socket
			// filter on its NETLINK_NETFILTER socket.
			prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
			if err != nil {
				return fmt.Errorf("load: %w", err)
			}
			defer prog.Close()
			fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ATTACH_BPF, prog.FD()); err != nil {
				return fmt.Errorf("attach: %w", err)
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			fmt.Printf("fail %s: %v\n", s.name, err)
		} else {
			fmt.Printf("ok %s\n", s.name)
		}
	}
	return 0
}
