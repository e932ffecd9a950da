package cilium

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/drift"
	"github.com/netdrift/netdrift/internal/model"
)

// stampedReader is a Reader with the write stamp over a private bpffs
// holding Cilium's IPv4 maps with one frontend of two backends.
func stampedReader(t *testing.T) (*Reader, func(count uint16)) {
	t.Helper()
	return stampedReaderMode(t, StampAuto)
}

func stampedReaderMode(t *testing.T, mode StampMode) (*Reader, func(count uint16)) {
	t.Helper()
	fs := privateBPFFS(t)
	if _, err := btf.LoadKernelSpec(); err != nil {
		t.Skipf("no kernel BTF, the stamp's programs cannot load: %v", err)
	}
	svc, bes := pinMap(t, fs, services4Layout), pinMap(t, fs, backends4Layout)
	putAll(t, svc, bes, frontend(vip, 80, 0, 0, 0, []uint32{1, 2}, nil),
		map[uint32]backendEntry{1: be(pod1, 0), 2: be(pod2, 0)})
	r := &Reader{Config: Config{BPFFS: fs, WriteStamp: mode}}
	t.Cleanup(func() { r.Close() })
	setCount := func(count uint16) {
		k, v := encodeService(svcEntry{Addr: vip, Port: 80, Proto: 6, Count: count, RevNat: 7})
		if err := svc.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return r, setCount
}

func snapshot(t *testing.T, r *Reader) model.Observed {
	t.Helper()
	obs, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, to, why, _ := r.Fallback(); to == "read time" {
		t.Fatalf("the write stamp did not attach (the kernel has BTF and this test runs as root): %s", why)
	}
	return obs
}

// TestReaderDatesByTheWriteStamp: a read 300 ms after a write to the
// maps says the state it found held since that write (within the write's
// system call), and a lag sample taken from that read has T2 at the write,
// not at the read. The first read (the maps just watched) cannot tell;
// a read after no write says the state held since the maps were watched.
func TestReaderDatesByTheWriteStamp(t *testing.T) {
	r, setCount := stampedReader(t)
	beforeFirst := time.Now()
	if obs := snapshot(t, r); !obs.HeldSince.IsZero() {
		t.Errorf("the first read dates its state at %v: its maps were not watched before it", obs.HeldSince)
	}
	afterFirst := time.Now()
	if obs := snapshot(t, r); obs.HeldSince.Before(beforeFirst) || obs.HeldSince.After(afterFirst) {
		t.Errorf("no write since the maps were watched: held since %v, want within the first read (%v..%v)",
			obs.HeldSince, beforeFirst, afterFirst)
	}

	fe := model.NewFrontend(vip, 80, model.TCP, model.ClusterIP)
	lag := drift.NewLagTracker()
	t1 := time.Now()
	want := map[model.Frontend]model.Verdict{fe: {Action: model.Forward, Backends: []netip.AddrPort{ap(pod1)}}}
	lag.Record(drift.Change{Service: model.ServiceName{Namespace: "shop", Name: "web"}, Kind: drift.ChangeRemove, T1: t1,
		Desired: want, Previous: map[model.Frontend]model.Verdict{fe: {Action: model.Forward, Backends: []netip.AddrPort{ap(pod1), ap(pod2)}}}})
	time.Sleep(20 * time.Millisecond)
	before := time.Now()
	setCount(1)
	after := time.Now()
	time.Sleep(300 * time.Millisecond)
	readAt := time.Now()
	obs := snapshot(t, r)
	const slack = 2 * time.Millisecond // the wall and monotonic clocks are read one after the other
	if obs.HeldSince.Before(before.Add(-slack)) || obs.HeldSince.After(after.Add(slack)) {
		t.Errorf("held since %v after the write began, want within the write (%v)", obs.HeldSince.Sub(before), after.Sub(before))
	}
	if got := obs.Frontends[fe].Backends; !slices.Equal(got, []netip.AddrPort{ap(pod1)}) {
		t.Fatalf("the read does not show the write: %v", got)
	}
	samples := lag.ObserveSince(obs, readAt, obs.HeldSince)
	if len(samples) != 1 || !samples[0].T2.Equal(obs.HeldSince) {
		t.Fatalf("samples %+v, want one with T2 at the stamp %v", samples, obs.HeldSince)
	}
	if d := readAt.Sub(samples[0].T2); d < 250*time.Millisecond {
		t.Errorf("T2 only %v before the read 300 ms after the write: dated by the read?", d)
	}
	t.Logf("T2-T1 %v by the stamp; the read came %v after T1", samples[0].NodeLag(), readAt.Sub(t1))
}

// TestReaderWithoutStampFallsBack: a reader whose stamp cannot attach
// reads on, dates nothing, and reports the fallback with its reason; a
// reader not asked for the stamp reports none.
func TestReaderWithoutStampFallsBack(t *testing.T) {
	fs := privateBPFFS(t)
	svc, bes := pinMap(t, fs, services4Layout), pinMap(t, fs, backends4Layout)
	putAll(t, svc, bes, frontend(vip, 80, 0, 0, 0, []uint32{1}, nil), map[uint32]backendEntry{1: be(pod1, 0)})
	plain := &Reader{Config: Config{BPFFS: fs}}
	obs, err := plain.Snapshot(context.Background())
	if err != nil || !obs.HeldSince.IsZero() {
		t.Fatalf("a reader without the stamp: held since %v, err %v", obs.HeldSince, err)
	}
	if from, _, _, _ := plain.Fallback(); from != "" {
		t.Errorf("a reader not asked for the stamp reports a fallback from %q", from)
	}
	r := &Reader{Config: Config{BPFFS: fs, WriteStamp: StampAuto}}
	r.stampFailed(errors.New("no BTF"))
	for i := 0; i < 2; i++ {
		obs, err := r.Snapshot(context.Background())
		if err != nil || !obs.HeldSince.IsZero() || len(obs.Frontends) != 1 {
			t.Fatalf("read %d without the stamp: held since %v, %d frontends, err %v", i, obs.HeldSince, len(obs.Frontends), err)
		}
	}
	from, to, why, since := r.Fallback()
	if from != "kernel time" || to != "read time" || !strings.Contains(why, "no BTF") || since.IsZero() {
		t.Errorf("fallback %q -> %q (%q) since %v", from, to, why, since)
	}
	if r.stamp != nil {
		t.Error("the stamp was attached after it failed")
	}
	// --cilium-write-stamp=off: no stamp, no fallback.
	off := &Reader{Config: Config{BPFFS: fs, WriteStamp: StampOff}}
	if obs, err := off.Snapshot(context.Background()); err != nil || !obs.HeldSince.IsZero() || off.stamp != nil {
		t.Errorf("stamp off: held since %v, stamp %v, err %v", obs.HeldSince, off.stamp, err)
	}
	if from, _, _, _ := off.Fallback(); from != "" {
		t.Errorf("stamp off reports a fallback from %q", from)
	}
}

// TestReaderFexitOnly: with --cilium-write-stamp=fexit on a
// kernel that refuses fexit, the reader reports the fallback and says the
// tracepoint mode would work; where fexit loads, it is used.
func TestReaderFexitOnly(t *testing.T) {
	r, _ := stampedReaderMode(t, StampFexit)
	if _, err := r.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	from, _, why, _ := r.Fallback()
	_, ferr := attachStampMode(stampFexit, unix.SYS_BPF)
	switch {
	case ferr == nil && (from != "" || r.stamp == nil || r.stamp.mode != stampFexit):
		t.Errorf("fexit loads here, but the reader has stamp %+v and fallback %q", r.stamp, why)
	case ferr != nil && (from == "" || !strings.Contains(why, "--cilium-write-stamp=auto")):
		t.Errorf("fexit is refused here (%v), but the reader reports fallback %q", ferr, why)
	}
	t.Logf("fexit here: %v; fallback: %q", ferr, why)
}

// TestReaderReportsTheTracepointMode: with --cilium-write-stamp=auto on a
// kernel that refuses fexit, the stamp runs on the system-call tracepoints
// and the reader reports that as a fallback from fexit, with fexit's error;
// where fexit loads, nothing is reported.
func TestReaderReportsTheTracepointMode(t *testing.T) {
	r, _ := stampedReaderMode(t, StampAuto)
	if _, err := r.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.stamp == nil {
		t.Skip("the write stamp did not attach on this kernel at all")
	}
	from, to, why, since := r.Fallback()
	switch r.stamp.mode {
	case stampFexit:
		if from != "" {
			t.Errorf("fexit attached, but the reader reports a fallback %q -> %q (%s)", from, to, why)
		}
	case stampTPBTF:
		if from != "fexit" || to != "system-call tracepoints" || !strings.Contains(why, r.stamp.fexit.Error()) ||
			!strings.Contains(why, "every system call") || since.IsZero() {
			t.Errorf("tracepoint mode attached, but the fallback is %q -> %q (%q) since %v", from, to, why, since)
		}
	}
	t.Logf("stamp mode %s; fallback %q -> %q", r.stamp.mode, from, to)
}

// TestReaderSkipsUnwrittenMaps: while the stamp counts no write to the
// maps, a Snapshot hands out the last full read again (same Version, same
// frontends); a write, new hints or a Resync make the next one a full
// read. Without the stamp every read is a full one.
func TestReaderSkipsUnwrittenMaps(t *testing.T) {
	r, setCount := stampedReader(t)
	fe := model.NewFrontend(vip, 80, model.TCP, model.ClusterIP)
	same := func(a, b model.Observed) bool {
		return a.Version == b.Version && reflect.ValueOf(a.Frontends).Pointer() == reflect.ValueOf(b.Frontends).Pointer()
	}
	o1 := snapshot(t, r)
	o2 := snapshot(t, r)
	if o1.Version == 0 || !same(o1, o2) {
		t.Fatalf("no write between two reads: versions %d and %d, the second a full read", o1.Version, o2.Version)
	}
	setCount(1)
	o3 := snapshot(t, r)
	if same(o2, o3) || len(o3.Frontends[fe].Backends) != 1 {
		t.Fatalf("after a write: version %d (was %d), backends %v", o3.Version, o2.Version, o3.Frontends[fe].Backends)
	}
	if o4 := snapshot(t, r); !same(o3, o4) || o4.HeldSince.IsZero() {
		t.Errorf("no write since: version %d (was %d), held since %v", o4.Version, o3.Version, o4.HeldSince)
	}
	r.SetHints(model.Hints{})
	o5 := snapshot(t, r)
	if same(o3, o5) {
		t.Error("new hints did not make a full read")
	}
	r.Resync()
	if o6 := snapshot(t, r); same(o5, o6) {
		t.Error("Resync did not make a full read")
	}

	plain := &Reader{Config: Config{BPFFS: r.Config.BPFFS}}
	p1, err := plain.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p2, err := plain.Snapshot(context.Background())
	if err != nil || same(p1, p2) {
		t.Errorf("without the stamp two reads share version %d (err %v)", p1.Version, err)
	}
}
