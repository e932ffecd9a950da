package cilium

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// privateBPFFS mounts a bpf filesystem of the test's own (each bpf mount
// is a new, empty instance) and removes it when the test ends.
func privateBPFFS(t *testing.T) string {
	t.Helper()
	netnstest.RequireRoot(t, "mounting a bpf filesystem and creating bpf maps")
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=700"); err != nil {
		t.Skipf("kernel cannot mount a bpf filesystem: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := os.MkdirAll(filepath.Join(dir, globalsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pinMap creates a map as cilium-agent does (from Go, no BTF) and pins it
// by name under <bpffs>/tc/globals.
func pinMap(t *testing.T, bpffs string, l mapLayout) *ebpf.Map { return pinMapN(t, bpffs, l, 1024) }

func pinMapN(t *testing.T, bpffs string, l mapLayout, entries uint32) *ebpf.Map {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: l.typ, KeySize: l.keySize, ValueSize: l.valueSize, MaxEntries: entries})
	if err != nil {
		t.Fatalf("create %s: %v", l.name, err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Pin(filepath.Join(bpffs, globalsDir, l.name)); err != nil {
		t.Fatalf("pin %s: %v", l.name, err)
	}
	return m
}

func putAll(t *testing.T, svc, bes *ebpf.Map, svcs []svcEntry, backends map[uint32]backendEntry) {
	t.Helper()
	for id, b := range backends {
		k, v := encodeBackend(id, b)
		if err := bes.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range svcs {
		k, v := encodeService(e)
		if err := svc.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// Real pinned maps in a private bpffs, written in Cilium's layout, read
// back by the Reader: the selectable slots are the backends, the parked one
// is evidence, and both families are read.
func TestReaderReadsPinnedMaps(t *testing.T) {
	fs := privateBPFFS(t)
	svc4, bes4 := pinMap(t, fs, services4Layout), pinMap(t, fs, backends4Layout)
	svc6, bes6 := pinMap(t, fs, services6Layout), pinMap(t, fs, backends6Layout)
	putAll(t, svc4, bes4, append(frontend(vip, 80, 0, 0, 0, []uint32{1, 2}, []uint32{3}), frontend(vip, 0, 0, 0, 0, nil, nil)...),
		map[uint32]backendEntry{1: be(pod1, 0), 2: be(pod2, 0), 3: be(pod3, stateTerminating)})
	putAll(t, svc6, bes6, frontend(vip6, 80, 0, 0, 0, []uint32{61}, nil),
		map[uint32]backendEntry{61: {Addr: pod61, Port: 8080, Proto: 6}})

	r := &Reader{Config: Config{BPFFS: fs}}
	obs, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Warnings) > 0 {
		t.Errorf("warnings: %q", obs.Warnings)
	}
	v4 := obs.Frontends[model.NewFrontend(vip, 80, model.TCP, model.ClusterIP)]
	if !slices.Equal(v4.Backends, []netip.AddrPort{ap(pod1), ap(pod2)}) || !strings.Contains(strings.Join(v4.Evidence, " "), "10.244.3.4:8080 terminating, parked") {
		t.Errorf("IPv4 frontend: %+v", v4)
	}
	v6 := obs.Frontends[model.NewFrontend(vip6, 80, model.TCP, model.ClusterIP)]
	if !slices.Equal(v6.Backends, []netip.AddrPort{netip.AddrPortFrom(pod61, 8080)}) {
		t.Errorf("IPv6 frontend: %+v", v6)
	}
	if len(obs.Frontends) != 2 {
		t.Errorf("frontends: %v", obs.Frontends)
	}

	// A backend removed from its slot (cilium-agent shrinks count) is gone
	// on the next read: nothing is cached between reads.
	k, v := encodeService(svcEntry{Addr: vip, Port: 80, Proto: 6, Count: 1, QCount: 0, RevNat: 7})
	if err := svc4.Put(k, v); err != nil {
		t.Fatal(err)
	}
	obs, err = r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := obs.Frontends[model.NewFrontend(vip, 80, model.TCP, model.ClusterIP)].Backends; !slices.Equal(got, []netip.AddrPort{ap(pod1)}) {
		t.Errorf("after count 1: %v", got)
	}
}

// A map of another layout is refused with what was found; no maps at all
// says what is missing and how to point elsewhere.
func TestReaderRefusesOtherLayouts(t *testing.T) {
	fs := privateBPFFS(t)
	r := &Reader{Config: Config{BPFFS: fs}}
	_, err := r.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no Cilium service map") || !strings.Contains(err.Error(), "--bpffs") {
		t.Fatalf("empty bpffs: %v", err)
	}
	pinMap(t, fs, mapLayout{services4Name, ebpf.Hash, 12, 16})
	pinMap(t, fs, backends4Layout)
	_, err = r.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "key 12 B and value 16 B") || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("wrong layout: %v", err)
	}
}

// The batch read and the one-at-a-time read (the fallback on kernels
// without batch lookups) see the same entries.
func TestDumpBatchMatchesIteration(t *testing.T) {
	fs := privateBPFFS(t)
	svc, bes := pinMapN(t, fs, services4Layout, 8192), pinMapN(t, fs, backends4Layout, 8192)
	var svcs []svcEntry
	backends := map[uint32]backendEntry{}
	for i := 0; i < 2500; i++ { // 5,000 services entries: more than one batch
		a := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		backends[uint32(i+1)] = be(netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), 0)
		svcs = append(svcs, frontend(a, 80, 0, 0, 0, []uint32{uint32(i + 1)}, nil)...)
	}
	putAll(t, svc, bes, svcs, backends)
	collect := func(read func(m *ebpf.Map, fn func(k, v []byte) error) error) map[string]string {
		out := map[string]string{}
		if err := read(svc, func(k, v []byte) error { out[string(k)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	batch, iter := collect(dump), collect(dumpIter)
	if len(batch) != len(svcs) || len(iter) != len(svcs) {
		t.Fatalf("batch %d, iteration %d entries, want %d", len(batch), len(iter), len(svcs))
	}
	for k, v := range iter {
		if batch[k] != v {
			t.Fatalf("entry %x differs", k)
		}
	}
}
