package cilium

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/bpf"
)

// attachStampT attaches the map-write stamp, skipping when the kernel
// cannot (no BTF, no fexit) and saying why.
func attachStampT(t *testing.T) *writeStamp {
	t.Helper()
	if _, err := btf.LoadKernelSpec(); err != nil {
		t.Skipf("no kernel BTF, the stamp's programs cannot load: %v", err)
	}
	s, err := attachWriteStamp(StampAuto)
	if err != nil {
		t.Fatalf("attach the map-write stamp (the kernel has BTF and this test runs as root): %v", err)
	}
	t.Cleanup(s.close)
	t.Logf("the stamp attached in mode %s", s.mode)
	return s
}

// stampOf reads one watched map's stamp.
func stampOf(t *testing.T, s *writeStamp, m *ebpf.Map) bpf.MapstampMapStamp {
	t.Helper()
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	var v bpf.MapstampMapStamp
	if err := s.watched.Lookup(uint32(id), &v); err != nil {
		t.Fatalf("stamp of map %d: %v", id, err)
	}
	return v
}

func monoNow(t *testing.T) uint64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// TestWriteStampDatesEachWrite: updates, deletions, batch updates and
// batch deletions of a watched map, each counted, (Cilium's services layout, pinned in a
// private bpffs) are each stamped between the clock read before the
// system call and the one after it, and counted; writes to an unwatched
// map of the same layout stamp nothing.
func TestWriteStampDatesEachWrite(t *testing.T) {
	fs := privateBPFFS(t)
	svc, bes := pinMap(t, fs, services4Layout), pinMap(t, fs, backends4Layout)
	other, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 12, ValueSize: 12, MaxEntries: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s := attachStampT(t)
	if changed, err := s.watch([]*ebpf.Map{svc, bes}); err != nil || !changed {
		t.Fatalf("watch: changed %v err %v", changed, err)
	}
	k, v := encodeService(svcEntry{Addr: vip, Port: 80, Proto: 6, Count: 1, RevNat: 7})
	k2, v2 := encodeService(svcEntry{Addr: vip, Port: 81, Proto: 6, Count: 1, RevNat: 8})
	keys, vals := [][12]byte{[12]byte(k), [12]byte(k2)}, [][12]byte{[12]byte(v), [12]byte(v2)}
	writes := []struct {
		name string
		op   func() error
	}{
		{"update", func() error { return svc.Put(k, v) }},
		{"delete", func() error { return svc.Delete(k) }},
		{"batch update", func() error { _, err := svc.BatchUpdate(keys, vals, nil); return err }},
		{"batch delete", func() error { _, err := svc.BatchDelete(keys, nil); return err }},
	}
	// The tracepoint mode counts write commands, the fexit mode the
	// entries written (a batch of two is two).
	wantWrites := map[string][]uint64{stampTPBTF: {1, 2, 3, 4}, stampFexit: {1, 2, 4, 6}}
	for i, w := range writes {
		before := monoNow(t)
		if err := w.op(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		after := monoNow(t)
		st := stampOf(t, s, svc)
		if st.Ns < before || st.Ns > after {
			t.Errorf("%s stamped %d ns after the call began, want within the call (%d ns)", w.name, int64(st.Ns-before), after-before)
		}
		if st.Writes != wantWrites[s.mode][i] {
			t.Errorf("after %s: %d writes counted, want %d (mode %s)", w.name, st.Writes, wantWrites[s.mode][i], s.mode)
		}
	}
	// A failed deletion (no such key) is no write.
	last := stampOf(t, s, svc)
	if err := svc.Delete(k); err == nil {
		t.Fatal("deleting a missing key succeeded")
	}
	if got := stampOf(t, s, svc); got != last {
		t.Errorf("a failed deletion was stamped: %+v, was %+v", got, last)
	}
	// The unwatched map: its writes leave the watched stamps as they are,
	// and it has no stamp of its own.
	if err := other.Put(k, v); err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(k); err != nil {
		t.Fatal(err)
	}
	if got := stampOf(t, s, svc); got != last {
		t.Errorf("writes to an unwatched map changed the watched stamp: %+v, was %+v", got, last)
	}
	if got := stampOf(t, s, bes); got.Writes != 0 || got.Ns != 0 {
		t.Errorf("the unwritten backends map has a stamp: %+v", got)
	}
	info, _ := other.Info()
	oid, _ := info.ID()
	var ov bpf.MapstampMapStamp
	if err := s.watched.Lookup(uint32(oid), &ov); err == nil {
		t.Errorf("the unwatched map %d has a stamp: %+v", oid, ov)
	}
}

// TestWriteStampSelfTest: tracepoint programs that see no map write (told
// another system call's number) fail the self-test on attaching, which
// says so.
func TestWriteStampSelfTest(t *testing.T) {
	privateBPFFS(t) // root
	if _, err := btf.LoadKernelSpec(); err != nil {
		t.Skipf("no kernel BTF, the stamp's programs cannot load: %v", err)
	}
	s, err := attachStampMode(stampTPBTF, unix.SYS_GETPID)
	if err == nil {
		s.close()
		t.Fatal("a stamp blind to bpf() attached")
	}
	if !strings.Contains(err.Error(), "self-test") || !strings.Contains(err.Error(), "0 writes") {
		t.Errorf("error %q, want the self-test's finding", err)
	}
}

// TestWriteStampWatchSet: watching another set of maps drops the old ones
// and reports the change; the same set again is no change.
func TestWriteStampWatchSet(t *testing.T) {
	fs := privateBPFFS(t)
	svc, bes := pinMap(t, fs, services4Layout), pinMap(t, fs, backends4Layout)
	s := attachStampT(t)
	if changed, err := s.watch([]*ebpf.Map{svc, bes}); err != nil || !changed {
		t.Fatalf("first watch: changed %v err %v", changed, err)
	}
	if changed, err := s.watch([]*ebpf.Map{bes, svc}); err != nil || changed {
		t.Fatalf("same maps again: changed %v err %v", changed, err)
	}
	if changed, err := s.watch([]*ebpf.Map{bes}); err != nil || !changed {
		t.Fatalf("one map fewer: changed %v err %v", changed, err)
	}
	k, v := encodeService(svcEntry{Addr: vip, Port: 80, Proto: 6, Count: 1})
	if err := svc.Put(k, v); err != nil {
		t.Fatal(err)
	}
	if ns, writes, err := s.last(); err != nil || ns != 0 || writes != 0 {
		t.Errorf("a write to a map no longer watched: last %d, %d writes, err %v", ns, writes, err)
	}
	var keys []uint32
	var key uint32
	var val bpf.MapstampMapStamp
	for it := s.watched.Iterate(); it.Next(&key, &val); {
		keys = append(keys, key)
	}
	info, _ := bes.Info()
	id, _ := info.ID()
	if !slices.Equal(keys, []uint32{uint32(id)}) {
		t.Errorf("watched ids %v, want [%d]", keys, id)
	}
}

// TestWriteStampPrecision measures how far a stamp lies before the return
// of the system call it dates (an update of a watched map), over 2000
// writes, and logs the distribution. Every stamp must lie within its call.
func TestWriteStampPrecision(t *testing.T) {
	fs := privateBPFFS(t)
	svc := pinMap(t, fs, services4Layout)
	s := attachStampT(t)
	if _, err := s.watch([]*ebpf.Map{svc}); err != nil {
		t.Fatal(err)
	}
	k, v := encodeService(svcEntry{Addr: vip, Port: 80, Proto: 6, Count: 1})
	const n = 2000
	gaps, calls := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		before := monoNow(t)
		if err := svc.Put(k, v); err != nil {
			t.Fatal(err)
		}
		after := monoNow(t)
		st := stampOf(t, s, svc)
		if st.Ns < before || st.Ns > after {
			t.Fatalf("write %d stamped outside its call: %d, call %d..%d", i, st.Ns, before, after)
		}
		gaps, calls = append(gaps, time.Duration(after-st.Ns)), append(calls, time.Duration(after-before))
	}
	slices.Sort(gaps)
	slices.Sort(calls)
	q := func(d []time.Duration, p float64) time.Duration { return d[int(p*float64(len(d)-1))] }
	t.Logf("stamp to syscall return over %d updates: p50 %v p90 %v p99 %v max %v (the whole call: p50 %v p99 %v)",
		n, q(gaps, .5), q(gaps, .9), q(gaps, .99), gaps[n-1], q(calls, .5), q(calls, .99))
}

// BenchmarkWriteStampCost: one map update system call without the stamp,
// with it attached (a map it does not watch: what every other bpf() write
// on the node pays) and on a watched map; and another system call
// (getppid) without and with it: an enabled syscall tracepoint sends every
// system call of the node through the kernel's tracing path.
func BenchmarkWriteStampCost(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("creating bpf maps and attaching the stamp need root")
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 12, ValueSize: 12, MaxEntries: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	k, v := encodeService(svcEntry{Addr: vip, Port: 80, Proto: 6, Count: 1})
	put := func(b *testing.B) {
		for b.Loop() {
			if err := m.Put(k, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	other := func(b *testing.B) {
		for b.Loop() {
			unix.Getppid()
		}
	}
	b.Run("no-stamp", put)
	b.Run("getppid-no-stamp", other)
	s, err := attachWriteStamp(StampAuto)
	if err != nil {
		b.Skipf("the stamp does not attach: %v", err)
	}
	defer s.close()
	b.Run("unwatched", put)
	b.Run("getppid-stamp", other)
	if _, err := s.watch([]*ebpf.Map{m}); err != nil {
		b.Fatal(err)
	}
	b.Run("watched", put)
}

// TestParseStampMode: the three modes are accepted, anything else is
// refused with what is wanted.
func TestParseStampMode(t *testing.T) {
	for _, s := range []string{"auto", "fexit", "off"} {
		if m, err := ParseStampMode(s); err != nil || string(m) != s {
			t.Errorf("%q: %q, %v", s, m, err)
		}
	}
	if _, err := ParseStampMode("kprobe"); err == nil || !strings.Contains(err.Error(), "auto, fexit or off") {
		t.Errorf("kprobe: %v", err)
	}
}
