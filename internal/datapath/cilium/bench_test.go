package cilium

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// fill pins the four maps under a private bpffs and writes services
// ClusterIP frontends of perSvc backends each, as cilium-agent lays them out.
func fill(b *testing.B, services, perSvc int) string {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root: bpf filesystem and maps")
	}
	dir := b.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=700"); err != nil {
		b.Skipf("cannot mount bpffs: %v", err)
	}
	b.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := os.MkdirAll(filepath.Join(dir, globalsDir), 0o700); err != nil {
		b.Fatal(err)
	}
	n := uint32(services*(perSvc+1) + 16)
	mk := func(l mapLayout) *ebpf.Map {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: l.typ, KeySize: l.keySize, ValueSize: l.valueSize, MaxEntries: n})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
		if err := m.Pin(filepath.Join(dir, globalsDir, l.name)); err != nil {
			b.Fatal(err)
		}
		return m
	}
	svc, bes := mk(services4Layout), mk(backends4Layout)
	mk(services6Layout)
	mk(backends6Layout)
	id := uint32(0)
	for s := 0; s < services; s++ {
		vip := netip.AddrFrom4([4]byte{10, 96, byte(s >> 8), byte(s)})
		k, v := encodeService(svcEntry{Addr: vip, Port: 80, Proto: 6, Count: uint16(perSvc), RevNat: uint16(s + 1)})
		if err := svc.Put(k, v); err != nil {
			b.Fatal(err)
		}
		for j := 1; j <= perSvc; j++ {
			id++
			pod := netip.AddrFrom4([4]byte{10, byte(128 + id>>16), byte(id >> 8), byte(id)})
			bk, bv := encodeBackend(id, backendEntry{Addr: pod, Port: 8080, Proto: 6})
			if err := bes.Put(bk, bv); err != nil {
				b.Fatal(err)
			}
			k, v := encodeService(svcEntry{Addr: vip, Port: 80, Proto: 6, Slot: uint16(j), BackendID: id, RevNat: uint16(s + 1)})
			if err := svc.Put(k, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dir
}

// BenchmarkFullRead reads every frontend of 10k and 100k endpoints (1,000
// and 10,000 services of 10) into the model. With NETDRIFT_CILIUM_DBG set to
// a cilium-dbg binary, the reference runs in the same benchmark on the same
// maps: `cilium-dbg bpf lb list -o json`, in a mount namespace where the
// benchmark's bpffs is the only bpf mount (cilium-dbg reads the first).
func BenchmarkFullRead(b *testing.B) {
	for _, sc := range []struct{ name, services int }{{10_000, 1_000}, {100_000, 10_000}} {
		b.Run(fmt.Sprintf("%dk", sc.name/1000), func(b *testing.B) {
			dir := fill(b, sc.services, 10)
			b.Run("netdrift", func(b *testing.B) {
				r := &Reader{Config: Config{BPFFS: dir}}
				for b.Loop() {
					obs, err := r.Snapshot(context.Background())
					if err != nil || len(obs.Frontends) != sc.services {
						b.Fatalf("%d frontends, %v", len(obs.Frontends), err)
					}
				}
			})
			b.Run("netdrift-unwritten", func(b *testing.B) {
				// With the write stamp and no write since the last read:
				// the last read is handed out again.
				r := &Reader{Config: Config{BPFFS: dir, WriteStamp: StampAuto}}
				defer r.Close()
				if _, err := r.Snapshot(context.Background()); err != nil {
					b.Fatal(err)
				}
				if _, to, why, _ := r.Fallback(); to == "read time" {
					b.Skipf("no write stamp: %s", why)
				}
				for b.Loop() {
					obs, err := r.Snapshot(context.Background())
					if err != nil || len(obs.Frontends) != sc.services {
						b.Fatalf("%d frontends, %v", len(obs.Frontends), err)
					}
				}
			})
			dbg := os.Getenv("NETDRIFT_CILIUM_DBG")
			if dbg == "" {
				return
			}
			b.Run("cilium-dbg", func(b *testing.B) {
				script := "for m in $(awk '$(NF-2)==\"bpf\" && $5!=" + strconv.Quote(dir) + " {print $5}' /proc/self/mountinfo); do umount -l \"$m\"; done; exec " +
					strconv.Quote(dbg) + " bpf lb list -o json"
				for b.Loop() {
					out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script).Output()
					if err != nil || len(out) < sc.name*20 {
						b.Fatalf("cilium-dbg: %v (%d bytes)", err, len(out))
					}
				}
			})
		})
	}
}
