package cilium

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/bpf"
)

// A writeStamp dates writes to Cilium's maps by the kernel's clock.
// Cilium publishes no change feed for its maps, so without it a change is
// dated by the poll that saw it. bpf/mapstamp.c, programs on the bpf()
// system call's entry and exit tracepoints, records for each watched map
// the kernel time of its last write command and a write counter; the
// reader sets the watched maps by their kernel ids and, after each read,
// takes the last write as the time since which the state it read has held.
type writeStamp struct {
	objs  bpf.MapstampObjects
	links []link.Link
	ids   []ebpf.MapID // watched, sorted
	since time.Time    // when ids were last set: writes before are not stamped
}

// maxWatched is bpf/mapstamp.c's MAX_WATCHED.
const maxWatched = 16

// attachWriteStamp loads bpf/mapstamp.c and attaches its programs to the
// syscalls/sys_{enter,exit}_bpf tracepoints. It fails on a kernel without
// BTF (the programs resolve a file descriptor to its map with CO-RE reads)
// or syscall tracepoints, or without CAP_BPF and CAP_PERFMON; the caller
// then dates changes by its reads.
func attachWriteStamp() (*writeStamp, error) {
	s := &writeStamp{}
	if err := bpf.LoadMapstampObjects(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load the map-write stamp (needs kernel BTF, CAP_BPF and CAP_PERFMON): %w", err)
	}
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"sys_enter_bpf", s.objs.StampEnter}, {"sys_exit_bpf", s.objs.StampExit}} {
		l, err := link.Tracepoint("syscalls", p.name, p.prog, nil)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("attach the map-write stamp to tracepoint syscalls/%s: %w", p.name, err)
		}
		s.links = append(s.links, l)
	}
	return s, nil
}

// watch makes ms the watched maps. It reports whether the set changed: the
// maps' writes before now were then not stamped.
func (s *writeStamp) watch(ms []*ebpf.Map) (bool, error) {
	ids := make([]ebpf.MapID, 0, len(ms))
	for _, m := range ms {
		info, err := m.Info()
		if err != nil {
			return false, fmt.Errorf("map info: %w", err)
		}
		id, ok := info.ID()
		if !ok {
			return false, errors.New("the kernel reports no map ids (Linux 4.13+)")
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if slices.Equal(ids, s.ids) {
		return false, nil
	}
	if len(ids) > maxWatched {
		return false, fmt.Errorf("%d maps to watch, the stamp holds %d", len(ids), maxWatched)
	}
	for _, old := range s.ids {
		if !slices.Contains(ids, old) {
			if err := s.objs.Watched.Delete(uint32(old)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return false, err
			}
		}
	}
	for _, id := range ids {
		if !slices.Contains(s.ids, id) {
			if err := s.objs.Watched.Put(uint32(id), bpf.MapstampMapStamp{}); err != nil {
				return false, err
			}
		}
	}
	s.ids, s.since = ids, time.Now()
	return true, nil
}

// last returns the kernel time (CLOCK_MONOTONIC ns) of the last stamped
// write to any watched map, 0 when none was, and the writes stamped.
func (s *writeStamp) last() (ns, writes uint64, err error) {
	var v bpf.MapstampMapStamp
	for _, id := range s.ids {
		if err := s.objs.Watched.Lookup(uint32(id), &v); err != nil {
			return 0, 0, fmt.Errorf("read the stamp of map %d: %w", id, err)
		}
		ns, writes = max(ns, v.Ns), writes+v.Writes
	}
	return ns, writes, nil
}

// heldSince is when the state a read that ended just now found began to
// hold: the last stamped write, or, when none was since the maps were
// watched, that moment. ok is false when the stamp cannot tell.
func (s *writeStamp) heldSince() (time.Time, bool) {
	ns, _, err := s.last()
	if err != nil || s.since.IsZero() {
		return time.Time{}, false
	}
	if ns == 0 {
		return s.since, true
	}
	return monoToWall(ns)
}

func (s *writeStamp) close() {
	for _, l := range s.links {
		l.Close()
	}
	s.links = nil
	s.objs.Close()
}

// monoToWall converts a CLOCK_MONOTONIC reading in ns to the wall clock;
// false when it is in the future.
func monoToWall(mono uint64) (time.Time, bool) {
	var ts unix.Timespec
	now := time.Now()
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return time.Time{}, false
	}
	age := time.Duration(ts.Nano() - int64(mono))
	if age < 0 {
		return time.Time{}, false
	}
	return now.Add(-age), true
}
