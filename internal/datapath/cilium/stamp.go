package cilium

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/bpf"
)

// A writeStamp dates writes to Cilium's maps by the kernel's clock.
// Cilium publishes no change feed for its maps, so without it a change is
// dated by the poll that saw it. bpf/mapstamp.c records for each watched
// map the kernel time of its last write from user space and a write
// counter; the reader sets the watched maps by their kernel ids and, after
// each read, takes the last write as the time since which the state it
// read has held.
type writeStamp struct {
	mode    string // stampFexit or stampTPBTF
	fexit   error  // why fexit was refused, when mode is stampTPBTF
	watched *ebpf.Map
	closers []io.Closer  // the programs, links and maps loaded
	ids     []ebpf.MapID // watched, sorted
	since   time.Time    // when ids were last set: writes before are not stamped
}

// The stamp's modes: fexit programs on the hash map's update and delete
// functions (only hash-map writes pay), or, where fexit is refused, BTF
// programs on the raw system-call tracepoints (every system call pays).
const (
	stampFexit = "fexit"
	stampTPBTF = "tp_btf"
)

// maxWatched is bpf/mapstamp.c's MAX_WATCHED.
const maxWatched = 16

// StampMode says how the agent's Cilium reader stamps map writes.
type StampMode string

const (
	// StampAuto: fexit programs, else the system-call tracepoints.
	StampAuto StampMode = "auto"
	// StampFexit: fexit programs only; where the kernel refuses them, reads
	// date the changes.
	StampFexit StampMode = "fexit"
	// StampOff: no stamp; reads date the changes.
	StampOff StampMode = "off"
)

// ParseStampMode checks a --cilium-write-stamp value.
func ParseStampMode(s string) (StampMode, error) {
	switch m := StampMode(s); m {
	case StampAuto, StampFexit, StampOff:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a write-stamp mode (want auto, fexit or off)", s)
}

// attachWriteStamp loads and attaches bpf/mapstamp.c's fexit programs or,
// when the kernel refuses them and mode allows it, its tracepoint
// programs, and checks that they stamp writes to a map of its own. It
// fails on a kernel without BTF or BTF tracepoints (Linux 5.5), without
// CAP_BPF and CAP_PERFMON, or when the self-test finds writes not stamped;
// the caller then dates changes by its reads.
func attachWriteStamp(mode StampMode) (*writeStamp, error) {
	s, ferr := attachStampMode(stampFexit, unix.SYS_BPF)
	if ferr == nil {
		return s, nil
	}
	if mode == StampFexit {
		return nil, fmt.Errorf("%w (--cilium-write-stamp=auto would use the system-call tracepoints)", ferr)
	}
	s, terr := attachStampMode(stampTPBTF, unix.SYS_BPF)
	if terr != nil {
		return nil, fmt.Errorf("%w; %w", ferr, terr)
	}
	s.fexit = ferr
	return s, nil
}

// stampFexitObjs and stampTPObjs are the objects of each mode.
type stampFexitObjs struct {
	Watched *ebpf.Map     `ebpf:"watched"`
	Update  *ebpf.Program `ebpf:"fexit_update"`
	Delete  *ebpf.Program `ebpf:"fexit_delete"`
}

type stampTPObjs struct {
	Watched  *ebpf.Map     `ebpf:"watched"`
	Inflight *ebpf.Map     `ebpf:"inflight"`
	Enter    *ebpf.Program `ebpf:"tp_enter"`
	Exit     *ebpf.Program `ebpf:"tp_exit"`
}

// attachStampMode loads and attaches one mode's programs and runs the
// self-test; nrBPF is the bpf() system call's number (tests give a wrong
// one to the tracepoint mode).
func attachStampMode(mode string, nrBPF uint32) (*writeStamp, error) {
	spec, err := bpf.LoadMapstamp()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables[bpf.MapstampVarNrBpf].Set(nrBPF); err != nil {
		return nil, fmt.Errorf("set the bpf() system call number: %w", err)
	}
	s := &writeStamp{mode: mode}
	var progs []*ebpf.Program
	switch mode {
	case stampFexit:
		var o stampFexitObjs
		err = spec.LoadAndAssign(&o, nil)
		s.watched, progs = o.Watched, []*ebpf.Program{o.Update, o.Delete}
		s.closers = []io.Closer{o.Watched, o.Update, o.Delete}
	default:
		var o stampTPObjs
		err = spec.LoadAndAssign(&o, nil)
		s.watched, progs = o.Watched, []*ebpf.Program{o.Enter, o.Exit}
		s.closers = []io.Closer{o.Watched, o.Inflight, o.Enter, o.Exit}
	}
	if err != nil {
		return nil, fmt.Errorf("load the map-write stamp's %s programs (needs kernel BTF, CAP_BPF and CAP_PERFMON): %w", mode, err)
	}
	for _, p := range progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			s.close()
			return nil, fmt.Errorf("attach the map-write stamp's %s programs: %w", mode, err)
		}
		s.closers = append(s.closers, l)
	}
	if err := s.selfTest(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// selfTest writes to and deletes from a map of its own, watched for the
// test, and checks both writes were stamped within their system calls:
// a stamp that silently missed writes would date every change too early.
func (s *writeStamp) selfTest() error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("map-write stamp self-test: %w", err)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		return fmt.Errorf("map-write stamp self-test: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return errors.New("map-write stamp self-test: the kernel reports no map ids")
	}
	if err := s.watched.Put(uint32(id), bpf.MapstampMapStamp{}); err != nil {
		return fmt.Errorf("map-write stamp self-test: %w", err)
	}
	defer s.watched.Delete(uint32(id))
	before := bpf.KtimeNow()
	err = errors.Join(m.Put(uint32(1), uint32(1)), m.Delete(uint32(1)))
	after := bpf.KtimeNow()
	if err != nil {
		return fmt.Errorf("map-write stamp self-test: %w", err)
	}
	var v bpf.MapstampMapStamp
	if err := s.watched.Lookup(uint32(id), &v); err != nil {
		return fmt.Errorf("map-write stamp self-test: %w", err)
	}
	if v.Writes != 2 || v.Ns < before || v.Ns > after {
		return fmt.Errorf("map-write stamp self-test (%s): an update and a deletion left %d writes stamped at %d, want 2 within %d..%d "+
			"(an architecture whose system-call registers bpf/mapstamp.c does not know?)", s.mode, v.Writes, v.Ns, before, after)
	}
	return nil
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
			if err := s.watched.Delete(uint32(old)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return false, err
			}
		}
	}
	for _, id := range ids {
		if !slices.Contains(s.ids, id) {
			if err := s.watched.Put(uint32(id), bpf.MapstampMapStamp{}); err != nil {
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
		if err := s.watched.Lookup(uint32(id), &v); err != nil {
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
	return bpf.KtimeToWall(ns, 0)
}

func (s *writeStamp) close() {
	// closers holds the maps and programs, then the links: links close first.
	for i := len(s.closers) - 1; i >= 0; i-- {
		if s.closers[i] != nil {
			s.closers[i].Close()
		}
	}
	s.closers = nil
}
