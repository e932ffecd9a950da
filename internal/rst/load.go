package rst

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/netdrift/netdrift/bpf"
)

// ErrUnsupported is wrapped by Load's error when no mode can run here.
var ErrUnsupported = errors.New("rst probe unsupported")

// Config configures the probe. The zero value selects everything automatically.
type Config struct {
	// Mode forces a mode (ModeTracepoint or ModeFentry); "" selects the best.
	Mode Mode
	// MaxWatched bounds the watched-address map (default 1024). The
	// preallocated per-CPU counter map holds 8 entries per watched address
	// (directions x states x endpoint ports x reasons, plus the live buckets
	// not yet drained): 8*MaxWatched*(8 bytes * CPUs), e.g. 4 MiB at 1024
	// and 64 CPUs; the endpoint-port map 4 per address.
	MaxWatched int
	// EventsPerSecond is the per-CPU event rate limit (default
	// DefaultEventsPerSecond).
	EventsPerSecond int
	// NoEvents disables the event ring buffer output (counters still count).
	NoEvents bool
	// TracefsDirs are searched for events/tcp/tcp_send_reset/format
	// (default /sys/kernel/tracing, /sys/kernel/debug/tracing).
	TracefsDirs []string
}

// DefaultEventsPerSecond is the per-CPU event rate limit unless
// Config.EventsPerSecond sets another.
const DefaultEventsPerSecond = 100

func (c Config) withDefaults() Config {
	if c.MaxWatched <= 0 {
		c.MaxWatched = 1024
	}
	if c.EventsPerSecond <= 0 {
		c.EventsPerSecond = DefaultEventsPerSecond
	}
	if c.NoEvents {
		c.EventsPerSecond = 0
	}
	if len(c.TracefsDirs) == 0 {
		c.TracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}
	}
	return c
}

// objects are the kernel objects of one attached mode.
type objects struct {
	maps  bpf.ProbeMaps
	progs []*ebpf.Program
	links []link.Link
}

func (o *objects) close() {
	for _, l := range o.links {
		l.Close()
	}
	for _, p := range o.progs {
		p.Close()
	}
	o.maps.Close()
}

// readSendResetFormat finds and parses the tcp_send_reset tracepoint format.
func readSendResetFormat(dirs []string) (Format, error) {
	var errs []string
	allMissing := true
	for _, d := range dirs {
		p := filepath.Join(d, "events/tcp/tcp_send_reset/format")
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err.Error())
			allMissing = allMissing && errors.Is(err, os.ErrNotExist)
			continue
		}
		return ParseFormat(string(b))
	}
	hint := ""
	if allMissing {
		hint = " (tracefs not mounted, or no tcp_send_reset tracepoint)"
	}
	return Format{}, fmt.Errorf("tracepoint format not readable%s: %s", hint, strings.Join(errs, "; "))
}

// loadSpec returns the collection spec configured for cfg.
func loadSpec(cfg Config) (*ebpf.CollectionSpec, error) {
	spec, err := bpf.LoadProbe()
	if err != nil {
		return nil, err
	}
	spec.Maps[bpf.ProbeMapWatched].MaxEntries = uint32(cfg.MaxWatched)
	spec.Maps[bpf.ProbeMapCounters].MaxEntries = uint32(cfg.MaxWatched * 8)
	spec.Maps[bpf.ProbeMapEndpointPorts].MaxEntries = uint32(cfg.MaxWatched * 4)
	if err := spec.Variables[bpf.ProbeVarEventsPerSec].Set(uint32(cfg.EventsPerSecond)); err != nil {
		return nil, fmt.Errorf("set events_per_sec: %w", err)
	}
	return spec, nil
}

// attachTracepoint loads the tracepoint program and attaches it.
func attachTracepoint(cfg Config) (*objects, reasonTable, string, error) {
	f, err := readSendResetFormat(cfg.TracefsDirs)
	if err != nil {
		return nil, nil, "", err
	}
	if err := CheckSendResetLayout(f); err != nil {
		return nil, nil, "", err
	}
	spec, err := loadSpec(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	var o struct {
		bpf.ProbeMaps
		Prog *ebpf.Program `ebpf:"tp_send_reset"`
	}
	if err := spec.LoadAndAssign(&o, nil); err != nil {
		return nil, nil, "", explainLoad(err)
	}
	objs := &objects{maps: o.ProbeMaps, progs: []*ebpf.Program{o.Prog}}
	l, err := link.Tracepoint("tcp", "tcp_send_reset", o.Prog, nil)
	if err != nil {
		objs.close()
		return nil, nil, "", fmt.Errorf("attach tracepoint tcp/tcp_send_reset: %w", explainLoad(err))
	}
	objs.links = append(objs.links, l)
	return objs, newReasonTable(f.Reasons), "tracepoint tcp/tcp_send_reset has the >= 6.10 layout (fires for resets sent without a socket)", nil
}

// attachBTF loads the tp_btf program (the tracepoint through BTF, no
// tracefs) and attaches it, when the kernel's tracepoint has the >= 6.10
// arguments (sk, skb, reason).
func attachBTF(cfg Config) (*objects, reasonTable, string, error) {
	kspec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, nil, "", fmt.Errorf("tp_btf needs kernel BTF: %w", err)
	}
	if err := checkBTFTracepoint(kspec); err != nil {
		return nil, nil, "", err
	}
	spec, err := loadSpec(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	var o struct {
		bpf.ProbeMaps
		Prog *ebpf.Program `ebpf:"btf_send_reset"`
	}
	if err := spec.LoadAndAssign(&o, nil); err != nil {
		return nil, nil, "", fmt.Errorf("load tp_btf program: %w", explainLoad(err))
	}
	objs := &objects{maps: o.ProbeMaps, progs: []*ebpf.Program{o.Prog}}
	l, err := link.AttachTracing(link.TracingOptions{Program: o.Prog})
	if err != nil {
		objs.close()
		return nil, nil, "", fmt.Errorf("attach tp_btf tcp_send_reset: %w", explainLoad(err))
	}
	objs.links = append(objs.links, l)
	return objs, newReasonTable(kernelReasons()), "BTF tracepoint tcp_send_reset with (sk, skb, reason) arguments (>= 6.10)", nil
}

// checkBTFTracepoint requires tcp_send_reset's >= 6.10 prototype in BTF:
// typedef btf_trace_tcp_send_reset = void (*)(void *, sk, skb, enum sk_rst_reason).
func checkBTFTracepoint(kspec *btf.Spec) error {
	var td *btf.Typedef
	if err := kspec.TypeByName("btf_trace_tcp_send_reset", &td); err != nil {
		return fmt.Errorf("no tcp_send_reset tracepoint in kernel BTF: %w", err)
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return fmt.Errorf("btf_trace_tcp_send_reset is %T, want a function pointer", td.Type)
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok {
		return fmt.Errorf("btf_trace_tcp_send_reset points to %T, want a function prototype", ptr.Target)
	}
	if len(proto.Params) != 4 {
		return fmt.Errorf("tcp_send_reset has %d arguments, want 3 (sk, skb, reason): kernel older than 6.10, the tracepoint does not fire for resets sent without a socket", len(proto.Params)-1)
	}
	return nil
}

// attachFentry loads the fentry programs and attaches them.
func attachFentry(cfg Config) (*objects, reasonTable, string, error) {
	if _, err := btf.LoadKernelSpec(); err != nil {
		return nil, nil, "", fmt.Errorf("fentry needs kernel BTF: %w", err)
	}
	if err := probeFentry(); err != nil {
		return nil, nil, "", err
	}
	spec, err := loadSpec(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	var o struct {
		bpf.ProbeMaps
		V4     *ebpf.Program `ebpf:"fentry_v4_send_reset"`
		Active *ebpf.Program `ebpf:"fentry_active_reset"`
	}
	if err := spec.LoadAndAssign(&o, nil); err != nil {
		return nil, nil, "", fmt.Errorf("load fentry programs: %w", explainLoad(err))
	}
	objs := &objects{maps: o.ProbeMaps, progs: []*ebpf.Program{o.V4, o.Active}}
	desc := "fentry on tcp_v4_send_reset, tcp_v6_send_reset, tcp_send_active_reset"
	// IPv6 may be a module that is not loaded (or absent): count IPv4 then.
	if v6, err := loadV6(spec, &o.ProbeMaps); err != nil {
		desc = "fentry on tcp_v4_send_reset, tcp_send_active_reset; IPv6 reply resets not counted: " + err.Error()
	} else {
		objs.progs = append(objs.progs, v6)
	}
	for _, p := range objs.progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			objs.close()
			return nil, nil, "", fmt.Errorf("attach fentry %s: %w", p, explainLoad(err))
		}
		objs.links = append(objs.links, l)
	}
	return objs, newReasonTable(kernelReasons()), desc, nil
}

// loadV6 loads the IPv6 reply program sharing the already loaded maps.
func loadV6(spec *ebpf.CollectionSpec, m *bpf.ProbeMaps) (*ebpf.Program, error) {
	var o struct {
		V6 *ebpf.Program `ebpf:"fentry_v6_send_reset"`
	}
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		bpf.ProbeMapWatched: m.Watched, bpf.ProbeMapCounters: m.Counters, bpf.ProbeMapStats: m.Stats,
		bpf.ProbeMapRatelimits: m.Ratelimits, bpf.ProbeMapEvents: m.Events, bpf.ProbeMapEndpointPorts: m.EndpointPorts,
	}}
	if err := spec.LoadAndAssign(&o, opts); err != nil {
		return nil, explainLoad(err)
	}
	return o.V6, nil
}

// kernelReasons reads enum sk_rst_reason from kernel BTF (>= 6.10), if any.
func kernelReasons() map[uint16]string {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil
	}
	var e *btf.Enum
	if err := spec.TypeByName("sk_rst_reason", &e); err != nil {
		return nil
	}
	out := map[uint16]string{}
	for _, v := range e.Values {
		out[uint16(v.Value)] = strings.TrimPrefix(v.Name, "SK_RST_REASON_")
	}
	return out
}

// explainLoad adds a hint to permission errors.
func explainLoad(err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w (needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)", err)
	}
	return err
}
