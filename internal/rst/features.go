package rst

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// Features are the kernel capabilities the modes need; a nil error means present.
type Features struct {
	// Tracepoint: tcp/tcp_send_reset exists with the >= 6.10 layout.
	Tracepoint error
	// BTF: kernel BTF is readable (needed by tp_btf, fentry and CO-RE).
	BTF error
	// BTFTracepoint: tcp_send_reset has the >= 6.10 arguments in BTF.
	BTFTracepoint error
	// Fentry: a minimal fentry program on tcp_v4_send_reset loads.
	Fentry error
}

// ProbeFeatures checks what this kernel offers, without attaching anything.
func ProbeFeatures(cfg Config) Features {
	cfg = cfg.withDefaults()
	var f Features
	if fm, err := readSendResetFormat(cfg.TracefsDirs); err != nil {
		f.Tracepoint = err
	} else {
		f.Tracepoint = CheckSendResetLayout(fm)
	}
	kspec, err := btf.LoadKernelSpec()
	if err != nil {
		f.BTF = fmt.Errorf("kernel BTF: %w", err)
		f.BTFTracepoint, f.Fentry = f.BTF, f.BTF
		return f
	}
	f.BTFTracepoint = checkBTFTracepoint(kspec)
	f.Fentry = probeFentry()
	return f
}

// probeFentry loads (without attaching) a two-instruction fentry program on
// tcp_v4_send_reset: the kernel refuses it without trampolines, without
// BTF for the target, or when policy (lockdown, LSM) forbids tracing programs.
func probeFentry() error {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceFEntry,
		AttachTo:     "tcp_v4_send_reset",
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("a minimal fentry program on tcp_v4_send_reset does not load: %w", explainLoad(err))
	}
	return p.Close()
}
