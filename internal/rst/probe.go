// Package rst loads the eBPF RST probe (bpf/) and runs the agent's one RST
// pipeline over it (pipeline.go): the watch list driven by the watch's pod
// deliveries (watchlist.go), the kernel's counters attributed to pods and
// services as the one source of counts (Snapshot, for /metrics, /v1/rsts and
// the per-service view), the rate-limited events as samples. Kernel access
// lives in load.go, probe.go and events.go; the watch list, attribution and
// output formatting are pure.
package rst

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/netdrift/netdrift/bpf"
)

// Probe is the loaded RST probe. A Probe that could not load (Mode() ==
// ModeNone) and a nil *Probe are safe to use: they report their Status, count
// nothing and return ErrUnsupported from Watch.
type Probe struct {
	mu      sync.Mutex
	status  Status
	objs    *objects
	reader  *ringbuf.Reader
	reasons reasonTable
	ids     map[netip.Addr]uint32
	ports   map[netip.Addr][]uint16 // endpoint ports written for an address
	nextID  uint32
	retired map[CounterKey]uint64 // final counts of unwatched addresses, reported once
	reading bool
	closed  bool
}

// Load picks a mode and attaches the probe. On failure it returns a usable
// Probe in ModeNone whose Status says why, together with an error wrapping
// ErrUnsupported. It never panics.
func Load(cfg Config) (*Probe, error) {
	cfg = cfg.withDefaults()
	memlockErr := rlimit.RemoveMemlock()
	modes := []Mode{ModeTracepoint, ModeBTF, ModeFentry}
	if cfg.Mode != "" {
		modes = []Mode{cfg.Mode}
	}
	var why []string
	for _, m := range modes {
		objs, reasons, desc, err := attach(m, cfg)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", m, err))
			continue
		}
		rd, err := ringbuf.NewReader(objs.maps.Events)
		if err != nil {
			objs.close()
			why = append(why, fmt.Sprintf("%s: ring buffer reader: %v", m, err))
			continue
		}
		if len(why) > 0 {
			desc += " (" + strings.Join(why, "; ") + ")"
		}
		return &Probe{
			status:  Status{Up: true, Mode: m, Reason: desc},
			objs:    objs,
			reader:  rd,
			reasons: reasons,
			ids:     map[netip.Addr]uint32{},
			ports:   map[netip.Addr][]uint16{},
			retired: map[CounterKey]uint64{},
		}, nil
	}
	if memlockErr != nil {
		why = append(why, "memlock: "+memlockErr.Error())
	}
	st := Status{Mode: ModeNone, Reason: "no rst probe mode could load: " + strings.Join(why, "; ")}
	return &Probe{status: st}, fmt.Errorf("%w: %s", ErrUnsupported, st.Reason)
}

func attach(m Mode, cfg Config) (*objects, reasonTable, string, error) {
	switch m {
	case ModeTracepoint:
		return attachTracepoint(cfg)
	case ModeBTF:
		return attachBTF(cfg)
	case ModeFentry:
		return attachFentry(cfg)
	}
	return nil, nil, "", fmt.Errorf("unknown mode %q", m)
}

// Status reports the mode and why it was chosen, or why none runs.
func (p *Probe) Status() Status {
	if p == nil {
		return Status{Mode: ModeNone, Reason: "rst probe not configured"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// Mode is the attached mode, ModeNone when not loaded.
func (p *Probe) Mode() Mode { return p.Status().Mode }

// live reports whether the probe can be used; the caller holds p.mu (or p is nil).
func (p *Probe) live() error {
	if p == nil {
		return fmt.Errorf("%w: rst probe not configured", ErrUnsupported)
	}
	if p.objs == nil {
		return fmt.Errorf("%w: %s", ErrUnsupported, p.status.Reason)
	}
	if p.closed {
		return errors.New("rst probe closed")
	}
	return nil
}

// Watch counts resets sent by or to ip, on any port.
func (p *Probe) Watch(ip netip.Addr) error { return p.WatchPort(ip, 0) }

// WatchPort counts resets sent by or to ip on port (the watched side's port);
// port 0 means any. Watching an address again replaces its port filter.
func (p *Probe) WatchPort(ip netip.Addr, port uint16) error {
	return p.watch(ip, bpf.ProbeWatchVal{Port: port})
}

// WatchEndpoint counts resets sent by or to ip, on any port, classified by
// state: at or after w.TermNs (the kernel time of its pod's deletion
// request) terminating, at or after w.GoneNs deleted, before both live, in
// time buckets (see CounterKey). Watching again updates the times.
func (p *Probe) WatchEndpoint(ip netip.Addr, w WatchState) error {
	return p.watch(ip, bpf.ProbeWatchVal{Flags: watchClassify, TermNs: w.TermNs, GoneNs: w.GoneNs})
}

func (p *Probe) watch(ip netip.Addr, val bpf.ProbeWatchVal) error {
	if !ip.IsValid() {
		return errors.New("watch: invalid address")
	}
	if p == nil {
		return p.live()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.live(); err != nil {
		return err
	}
	ip = ip.Unmap()
	id, ok := p.ids[ip]
	if !ok {
		p.nextID++
		id = p.nextID
	}
	val.Id = id
	if err := p.objs.maps.Watched.Update(ipKey(ip), &val, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("watch %s: %w", ip, err)
	}
	p.ids[ip] = id
	return nil
}

// Unwatch stops counting ip. Its final counts appear once more in the next
// Counters() / Counts() and are then dropped (so an address watched again
// starts at zero).
func (p *Probe) Unwatch(ip netip.Addr) error {
	if p == nil {
		return p.live()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.live(); err != nil {
		return err
	}
	ip = ip.Unmap()
	if err := p.objs.maps.Watched.Delete(ipKey(ip)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unwatch %s: %w", ip, err)
	}
	delete(p.ids, ip)
	if err := p.setPortsLocked(ip, nil); err != nil {
		return err
	}
	final, keys, err := p.readCounters(func(a netip.Addr) bool { return a == ip })
	if err != nil {
		return err
	}
	for k, n := range final {
		p.retired[k] += n
	}
	for _, k := range keys {
		if err := p.objs.maps.Counters.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("unwatch %s: delete counter: %w", ip, err)
		}
	}
	return nil
}

// SetPorts sets the endpoint ports of a watched address (its Services'
// target ports): its resets on them are counted with the port, others with
// port 0.
func (p *Probe) SetPorts(ip netip.Addr, ports []uint16) error {
	if p == nil {
		return p.live()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.live(); err != nil {
		return err
	}
	return p.setPortsLocked(ip.Unmap(), ports)
}

func (p *Probe) setPortsLocked(ip netip.Addr, ports []uint16) error {
	want := map[uint16]bool{}
	for _, port := range ports {
		want[port] = true
	}
	var keep []uint16
	for _, port := range p.ports[ip] {
		if want[port] {
			keep = append(keep, port)
			delete(want, port)
			continue
		}
		k := bpf.ProbePortKey{Addr: ip.As16(), Port: port}
		if err := p.objs.maps.EndpointPorts.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("endpoint port %s: %w", netip.AddrPortFrom(ip, port), err)
		}
	}
	for port := range want {
		k := bpf.ProbePortKey{Addr: ip.As16(), Port: port}
		one := uint8(1)
		if err := p.objs.maps.EndpointPorts.Update(&k, &one, ebpf.UpdateAny); err != nil {
			p.ports[ip] = keep
			return fmt.Errorf("endpoint port %s: %w", netip.AddrPortFrom(ip, port), err)
		}
		keep = append(keep, port)
	}
	if len(keep) == 0 {
		delete(p.ports, ip)
	} else {
		p.ports[ip] = keep
	}
	return nil
}

// Watched lists the watched addresses.
func (p *Probe) Watched() []netip.Addr {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]netip.Addr, 0, len(p.ids))
	for a := range p.ids {
		out = append(out, a)
	}
	sortAddrs(out)
	return out
}

// Counts returns the cumulative counts of every address counted since it was
// watched, including addresses unwatched since the previous call (once).
// Cumulative only for addresses watched with Watch / WatchPort: the live
// buckets of WatchEndpoint addresses are drained (see Counters).
func (p *Probe) Counts() (map[netip.Addr]Counts, error) {
	cs, err := p.Counters()
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]Counts{}
	for k, n := range cs {
		c := out[k.Addr]
		c.add(k.Dir, k.Reason, n)
		out[k.Addr] = c
	}
	return out, nil
}

// Counters returns the kernel's per-CPU counters summed, per key, including
// the final counts of addresses unwatched since the previous call (once).
// The live buckets of WatchEndpoint addresses older than two buckets, which
// no reset can increase any more, are returned one last time and removed
// from the kernel's map: a caller keeping the previous values sees the key
// disappear after its final value.
func (p *Probe) Counters() (map[CounterKey]uint64, error) {
	if p == nil {
		return map[CounterKey]uint64{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil || p.closed {
		return map[CounterKey]uint64{}, nil
	}
	out, keys, err := p.readCounters(nil)
	if err != nil {
		return nil, err
	}
	nowBucket := MonoNow() >> BucketShift
	for _, k := range keys {
		if State(k.State) == StateLive && k.Bucket+2 < nowBucket {
			if err := p.objs.maps.Counters.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil, fmt.Errorf("drain rst counter: %w", err)
			}
		}
	}
	for k, n := range p.retired {
		out[k] += n
	}
	p.retired = map[CounterKey]uint64{}
	return out, nil
}

// readCounters sums the per-CPU counters, optionally only for matching addresses.
func (p *Probe) readCounters(keep func(netip.Addr) bool) (map[CounterKey]uint64, []bpf.ProbeCounterKey, error) {
	out := map[CounterKey]uint64{}
	var keys []bpf.ProbeCounterKey
	var k bpf.ProbeCounterKey
	var perCPU []uint64
	it := p.objs.maps.Counters.Iterate()
	for it.Next(&k, &perCPU) {
		a := netip.AddrFrom16(k.Addr).Unmap()
		if keep != nil && !keep(a) {
			continue
		}
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		ck := CounterKey{Addr: a, Dir: Direction(k.Dir), State: State(k.State), Reason: p.reasons.name(k.Reason),
			Port: k.Port, Bucket: k.Bucket}
		out[ck] += n
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("read rst counters: %w", err)
	}
	return out, keys, nil
}

// Stats returns the probe's loss counters.
func (p *Probe) Stats() (Stats, error) {
	if p == nil {
		return Stats{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil || p.closed {
		return Stats{}, nil
	}
	var vals [4]uint64
	for i := range vals {
		var perCPU []uint64
		if err := p.objs.maps.Stats.Lookup(uint32(i), &perCPU); err != nil {
			return Stats{}, fmt.Errorf("read rst stats: %w", err)
		}
		for _, v := range perCPU {
			vals[i] += v
		}
	}
	return Stats{EventsRateLimited: vals[0], EventsLost: vals[1], CountersFull: vals[2], Unparsed: vals[3]}, nil
}

// Close detaches the probe and releases every kernel object. Idempotent.
func (p *Probe) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.objs == nil {
		p.closed = true
		return nil
	}
	p.closed = true
	var err error
	if p.reader != nil {
		err = p.reader.Close()
	}
	p.objs.close()
	p.status = Status{Mode: ModeNone, Reason: "closed"}
	return err
}

func ipKey(ip netip.Addr) *bpf.ProbeIpKey {
	return &bpf.ProbeIpKey{Addr: ip.As16()}
}
