package cilium

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
)

// globalsDir is where cilium-agent pins its maps inside the bpffs.
const globalsDir = "tc/globals"

// FindBPFFS returns the mount point of the first bpf filesystem in a
// mountinfo file (/proc/self/mountinfo), as Cilium's own tools find it.
func FindBPFFS(mountinfo io.Reader) (string, error) {
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if f := strings.Fields(post); len(f) == 0 || f[0] != "bpf" {
			continue
		}
		if f := strings.Fields(pre); len(f) >= 5 {
			return unescapeMount(f[4]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no bpf filesystem is mounted (Cilium mounts one at /sys/fs/bpf); pass --bpffs to name it")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// openPinned opens a pinned map read-only and checks its layout. A map that
// is not pinned returns an error wrapping fs.ErrNotExist.
func openPinned(bpffs string, l mapLayout) (*ebpf.Map, error) {
	path := filepath.Join(bpffs, globalsDir, l.name)
	m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("open %s: %w (run as root, or with CAP_BPF and CAP_SYS_ADMIN)", path, err)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := l.check(m.Type(), m.KeySize(), m.ValueSize()); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// dump calls fn for every key and value of a map: in batches of up to
// batchSize entries per system call (BPF_MAP_LOOKUP_BATCH, Linux 5.6+),
// else one entry at a time. Either way a dump taken while cilium-agent
// writes is as consistent as Cilium's own listing, which iterates.
func dump(m *ebpf.Map, fn func(k, v []byte) error) error {
	var err error
	switch {
	case m.KeySize() == 12 && m.ValueSize() == 12:
		err = dumpBatch(m, func(k *[12]byte) []byte { return k[:] }, func(v *[12]byte) []byte { return v[:] }, fn)
	case m.KeySize() == 24 && m.ValueSize() == 12:
		err = dumpBatch(m, func(k *[24]byte) []byte { return k[:] }, func(v *[12]byte) []byte { return v[:] }, fn)
	case m.KeySize() == 4 && m.ValueSize() == 12:
		err = dumpBatch(m, func(k *[4]byte) []byte { return k[:] }, func(v *[12]byte) []byte { return v[:] }, fn)
	case m.KeySize() == 4 && m.ValueSize() == 24:
		err = dumpBatch(m, func(k *[4]byte) []byte { return k[:] }, func(v *[24]byte) []byte { return v[:] }, fn)
	default:
		return dumpIter(m, fn)
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		return dumpIter(m, fn)
	}
	return err
}

// batchSize is how many entries one batch lookup asks for.
const batchSize = 4096

// dumpBatch reads a map with batch lookups into fixed-size key and value
// arrays (the library sizes a batch by the slices' element counts).
func dumpBatch[K, V any](m *ebpf.Map, kb func(*K) []byte, vb func(*V) []byte, fn func(k, v []byte) error) error {
	keys, vals := make([]K, batchSize), make([]V, batchSize)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := 0; i < n; i++ {
			if ferr := fn(kb(&keys[i]), vb(&vals[i])); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// dumpIter reads a map one entry at a time. The iterator restarts from
// the first key when the entry it stood on is deleted under it.
func dumpIter(m *ebpf.Map, fn func(k, v []byte) error) error {
	k := make([]byte, m.KeySize())
	v := make([]byte, m.ValueSize())
	it := m.Iterate()
	for it.Next(&k, &v) {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return it.Err()
}

// tables is one read of the maps of both families.
type tables struct {
	services []svcEntry
	backends map[uint32]backendEntry
	families []string // families whose maps exist
	skipped  bool     // not read: the caller's opened hook said so
}

// readTables reads the services and backends maps of both families under
// bpffs. A family whose services map is not pinned is left out (a node
// without IPv6); no services map at all is an error saying so. opened,
// when not nil, is called with every map opened before any is read; when
// it returns true nothing is read (tables.skipped).
func readTables(bpffs string, opened func([]*ebpf.Map) (skip bool, err error)) (tables, error) {
	t := tables{backends: map[uint32]backendEntry{}}
	var fams []family
	defer func() {
		for _, f := range fams {
			f.svc.Close()
			f.bes.Close()
		}
	}()
	for _, fam := range []struct {
		name     string
		svc, bes mapLayout
	}{{"IPv4", services4Layout, backends4Layout}, {"IPv6", services6Layout, backends6Layout}} {
		f, ok, err := openFamily(bpffs, fam.svc, fam.bes)
		if err != nil {
			return t, err
		}
		if ok {
			fams = append(fams, f)
			t.families = append(t.families, fam.name)
		}
	}
	if len(t.families) == 0 {
		return t, fmt.Errorf("no Cilium service map under %s (%s, %s): is this node running Cilium's kube-proxy replacement? "+
			"(--bpffs names another bpf filesystem)", filepath.Join(bpffs, globalsDir), services4Name, services6Name)
	}
	if opened != nil {
		var ms []*ebpf.Map
		for _, f := range fams {
			ms = append(ms, f.svc, f.bes)
		}
		skip, err := opened(ms)
		if err != nil || skip {
			t.skipped = skip
			return t, err
		}
	}
	for _, f := range fams {
		if err := t.readFamily(f); err != nil {
			return t, err
		}
	}
	return t, nil
}

// family is one family's open services and backends maps.
type family struct {
	svc, bes   *ebpf.Map
	svcL, besL mapLayout
}

// openFamily opens one family's maps; false when its services map is not
// pinned.
func openFamily(bpffs string, svcL, beL mapLayout) (family, bool, error) {
	svc, err := openPinned(bpffs, svcL)
	if errors.Is(err, fs.ErrNotExist) {
		return family{}, false, nil
	} else if err != nil {
		return family{}, false, err
	}
	bes, err := openPinned(bpffs, beL)
	if err != nil {
		svc.Close()
		return family{}, false, fmt.Errorf("%s is pinned but its backends map is not usable: %w", svcL.name, err)
	}
	return family{svc: svc, bes: bes, svcL: svcL, besL: beL}, true, nil
}

func (t *tables) readFamily(f family) error {
	if err := dump(f.bes, func(k, v []byte) error {
		id, b, err := decodeBackend(k, v)
		t.backends[id] = b
		return err
	}); err != nil {
		return fmt.Errorf("read %s: %w", f.besL.name, err)
	}
	if err := dump(f.svc, func(k, v []byte) error {
		e, err := decodeService(k, v)
		t.services = append(t.services, e)
		return err
	}); err != nil {
		return fmt.Errorf("read %s: %w", f.svcL.name, err)
	}
	return nil
}

// Pinned reports where a services map of either family is pinned under
// bpffs ("" = the first bpf mount). It stats the pins; it opens no map.
func Pinned(bpffs string) (string, bool) {
	if bpffs == "" {
		var err error
		if bpffs, err = BPFFSFromSystem(); err != nil {
			return "", false
		}
	}
	for _, name := range []string{services4Name, services6Name} {
		p := filepath.Join(bpffs, globalsDir, name)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// BPFFSFromSystem finds the bpffs as Cilium's tools do.
func BPFFSFromSystem() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	return FindBPFFS(f)
}
