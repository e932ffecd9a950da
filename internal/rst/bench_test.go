package rst

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// BenchmarkRSTFlood measures the cost of the probe under a flood of resets:
// each op sends one TCP SYN (raw socket, client namespace) to a closed port
// in the pod namespace, which answers with an RST; both namespaces' processing
// runs in the sending syscall's softirq on the same CPU. Sub-benchmarks in one
// run: no probe, probe attached with the pod IP not watched (the cost every
// reset on a node pays), and with the pod IP watched (counter update plus
// rate-limited events, drained as the agent would).
//
//	go test -run '^$' -bench BenchmarkRSTFlood -benchtime 2s -count 5 ./internal/rst/
func BenchmarkRSTFlood(b *testing.B) {
	requireRoot(b)
	ensureTracefs(b)
	pr := newPair(b)
	fd := rawSender(b, pr.clientNs)
	syn := synPacket(pr.client4, netip.AddrPortFrom(pr.pod4, 9))
	dst := &unix.SockaddrInet4{Addr: pr.pod4.As4()}

	flood := func(b *testing.B, p *Probe) {
		before := outRsts(b, pr.pod)
		bpfBefore := bpfRuntime(b, p)
		var cpu time.Duration
		runLocked(func() {
			start := threadCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				binary.BigEndian.PutUint16(syn[20:], uint16(10000+i%50000)) // vary the source port
				fixTCPChecksum(syn, pr.client4, pr.pod4)
				if err := unix.Sendto(fd, syn, 0, dst); err != nil {
					b.Error(err)
					return
				}
			}
			b.StopTimer()
			cpu = threadCPU() - start
		})
		sent := outRsts(b, pr.pod) - before
		b.ReportMetric(float64(sent)/float64(b.N), "rsts/op")
		// CPU time of the sending thread, which also runs both namespaces'
		// softirq processing: less sensitive to other load than ns/op.
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		if p != nil {
			b.ReportMetric(float64(bpfRuntime(b, p)-bpfBefore)/float64(b.N), "bpf-ns/op")
		}
	}
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Logf("bpf run-time stats unavailable: %v", err)
	} else {
		defer stats.Close()
	}
	b.Run("probe=none", func(b *testing.B) { flood(b, nil) })
	for _, watched := range []bool{false, true} {
		name := "probe=unwatched"
		if watched {
			name = "probe=watched"
		}
		b.Run(name, func(b *testing.B) {
			p, err := Load(Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.Logf("mode %s", p.Mode())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if watched {
				if err := p.Watch(pr.pod4); err != nil {
					b.Fatal(err)
				}
				go func() {
					for range p.Events(ctx) {
					}
				}()
			}
			flood(b, p)
			if watched {
				c, _ := p.Counts()
				if c[pr.pod4].SentBy == 0 {
					b.Errorf("watched pod counted nothing: %+v", c[pr.pod4])
				}
			}
		})
	}
}

// runLocked runs fn on a goroutine locked to one OS thread (for thread CPU time).
func runLocked(fn func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(done)
		fn()
	}()
	<-done
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// bpfRuntime sums the kernel's run-time statistics of the probe's programs
// (zero without a probe or when stats are not enabled).
func bpfRuntime(b *testing.B, p *Probe) time.Duration {
	if p == nil || p.objs == nil {
		return 0
	}
	var sum time.Duration
	for _, prog := range p.objs.progs {
		st, err := prog.Stats()
		if err != nil {
			b.Fatal(err)
		}
		sum += st.Runtime
	}
	return sum
}

// rawSender opens an IPPROTO_RAW socket (send only, IP_HDRINCL) in ns.
func rawSender(b testing.TB, ns netns.NsHandle) int {
	fd := -1
	err := inNetns(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	return fd
}

// synPacket builds an IPv4 header (the kernel fills length, id and checksum)
// and a 20-byte TCP SYN.
func synPacket(src netip.Addr, dst netip.AddrPort) []byte {
	p := make([]byte, 40)
	p[0], p[8], p[9] = 0x45, 64, unix.IPPROTO_TCP
	s, d := src.As4(), dst.Addr().As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	t := p[20:]
	binary.BigEndian.PutUint16(t[2:], dst.Port())
	binary.BigEndian.PutUint32(t[4:], 1)
	t[12], t[13] = 5<<4, 0x02
	binary.BigEndian.PutUint16(t[14:], 64240)
	return p
}

func fixTCPChecksum(p []byte, src, dst netip.Addr) {
	t := p[20:]
	t[16], t[17] = 0, 0
	s, d := src.As4(), dst.As4()
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	add(s[:])
	add(d[:])
	sum += unix.IPPROTO_TCP + uint32(len(t))
	add(t)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(t[16:], ^uint16(sum))
}

// outRsts reads Tcp OutRsts of a namespace from /proc/net/snmp.
func outRsts(b testing.TB, ns string) uint64 {
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").Output()
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "OutRsts" && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	b.Fatal("no Tcp OutRsts in /proc/net/snmp")
	return 0
}

// BenchmarkRSTFloodPaired interleaves the three states in rounds of 2000 SYNs
// within one benchmark (probe detached / attached with the pod unwatched /
// attached and watched), so all three see the same background load; it
// reports each state's thread CPU per RST and the ratios to "none".
//
// One sub-benchmark per mode this kernel supports.
//
//	go test -run '^$' -bench BenchmarkRSTFloodPaired -benchtime 300000x -count 5 ./internal/rst/
func BenchmarkRSTFloodPaired(b *testing.B) {
	requireRoot(b)
	ensureTracefs(b)
	pr := newPair(b)
	fd := rawSender(b, pr.clientNs)
	for _, mode := range []Mode{ModeTracepoint, ModeBTF, ModeFentry} {
		b.Run("mode="+string(mode), func(b *testing.B) { floodPaired(b, pr, fd, mode, 0) })
	}
}

// BenchmarkRSTFloodEndpoints is BenchmarkRSTFloodPaired as the agent runs
// the probe (issue 15): 1,000 other local endpoint addresses watched with
// WatchEndpoint and an endpoint port each, and the flooded pod watched the
// same way on the flooded port (state classification, the endpoint-port
// lookup and the live time buckets, the costliest path: no deletion known).
//
//	go test -run '^$' -bench BenchmarkRSTFloodEndpoints -benchtime 300000x -count 5 ./internal/rst/
func BenchmarkRSTFloodEndpoints(b *testing.B) {
	requireRoot(b)
	ensureTracefs(b)
	pr := newPair(b)
	fd := rawSender(b, pr.clientNs)
	for _, mode := range []Mode{ModeTracepoint, ModeBTF, ModeFentry} {
		b.Run("mode="+string(mode)+"/endpoints=1000", func(b *testing.B) { floodPaired(b, pr, fd, mode, 1000) })
	}
}

func floodPaired(b *testing.B, pr *pair, fd int, mode Mode, endpoints int) {
	syn := synPacket(pr.client4, netip.AddrPortFrom(pr.pod4, 9))
	dst := &unix.SockaddrInet4{Addr: pr.pod4.As4()}
	p, err := Load(Config{Mode: mode, MaxWatched: max(1024, 2*endpoints)})
	if err != nil {
		b.Skipf("mode %s unavailable: %v", mode, err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for range p.Events(ctx) {
		}
	}()
	for i := range endpoints {
		ip := netip.AddrFrom4([4]byte{10, 201, byte(i >> 8), byte(i)})
		if err := p.WatchEndpoint(ip, WatchState{}); err != nil {
			b.Fatal(err)
		}
		if err := p.SetPorts(ip, []uint16{8080}); err != nil {
			b.Fatal(err)
		}
	}
	asEndpoint := endpoints > 0
	const round = 2000
	var cpu [3]time.Duration
	var ops [3]int
	seq := 0
	b.ResetTimer()
	for done := 0; done < b.N; {
		state := (done / round) % 3
		n := min(round, b.N-done)
		b.StopTimer()
		setState(b, p, state, pr.pod4, asEndpoint)
		b.StartTimer()
		runLocked(func() {
			start := threadCPU()
			for i := 0; i < n; i++ {
				seq++
				binary.BigEndian.PutUint16(syn[20:], uint16(10000+seq%50000))
				fixTCPChecksum(syn, pr.client4, pr.pod4)
				if err := unix.Sendto(fd, syn, 0, dst); err != nil {
					b.Error(err)
					return
				}
			}
			cpu[state] += threadCPU() - start
		})
		ops[state] += n
		done += n
	}
	b.StopTimer()
	per := func(s int) float64 { return float64(cpu[s].Nanoseconds()) / float64(max(ops[s], 1)) }
	b.ReportMetric(per(0), "none-cpu-ns/op")
	b.ReportMetric(per(1), "unwatched-cpu-ns/op")
	b.ReportMetric(per(2), "watched-cpu-ns/op")
	if per(0) > 0 {
		b.ReportMetric(per(1)/per(0), "unwatched/none")
		b.ReportMetric(per(2)/per(0), "watched/none")
	}
	b.Logf("mode %s", p.Mode())
}

// setState detaches (0), attaches unwatched (1) or attaches watched (2:
// with Watch, or as the agent watches an endpoint on its port 9).
func setState(b *testing.B, p *Probe, state int, ip netip.Addr, asEndpoint bool) {
	for _, l := range p.objs.links {
		l.Close()
	}
	p.objs.links = nil
	if err := p.Unwatch(ip); err != nil {
		b.Fatal(err)
	}
	if state == 0 {
		return
	}
	for _, prog := range p.objs.progs {
		var l link.Link
		var err error
		if p.Mode() == ModeTracepoint {
			l, err = link.Tracepoint("tcp", "tcp_send_reset", prog, nil)
		} else {
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		}
		if err != nil {
			b.Fatal(err)
		}
		p.objs.links = append(p.objs.links, l)
	}
	if state == 2 && asEndpoint {
		if err := p.WatchEndpoint(ip, WatchState{}); err != nil {
			b.Fatal(err)
		}
		if err := p.SetPorts(ip, []uint16{9}); err != nil {
			b.Fatal(err)
		}
	} else if state == 2 {
		if err := p.Watch(ip); err != nil {
			b.Fatal(err)
		}
	}
}
