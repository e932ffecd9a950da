package agent

import "time"

// CommitLog is what the nf_tables change feed knows of the kernel's
// commits (nfevents.Watcher): the last generation it saw, and how many
// commits came after a given generation, from when.
type CommitLog interface {
	Generation() uint32
	CommittedAfter(gen uint32) (int, time.Time)
}

// viewGen follows which nf_tables generation the published view reflects,
// to tell at every answer how far that view trails the kernel. The loop
// applies change events in order: a read reflects at least the generation
// of the last event applied before it started (a full read, more).
type viewGen struct {
	log       CommitLog // nil: no change events, no measure (each read is whole)
	consumed  uint32    // the generation of the last event applied
	published uint32    // the generation the published view reflects
	set       bool      // a read was published
}

// Behind is how far the published datapath view trails the kernel: the
// commits the change feed saw after it, and when the first of them came.
type Behind struct {
	Commits int
	Since   time.Time
}

func newViewGen(log CommitLog) viewGen {
	g := viewGen{log: log}
	if log != nil {
		g.consumed = log.Generation() // the first read is a full one: at least this
	}
	return g
}

// applied notes a change event applied to the reader.
func (g *viewGen) applied(gen uint32) {
	if int32(gen-g.consumed) > 0 {
		g.consumed = gen
	}
}

// readStarts returns the generation a read starting now reflects at least.
func (g *viewGen) readStarts() uint32 { return g.consumed }

// publish notes that a read reflecting gen was published.
func (g *viewGen) publish(gen uint32) { g.published, g.set = gen, true }

// ended: the change feed ended; reads are whole from now on.
func (g *viewGen) ended() { g.log = nil }

// behind is how far the published view trails the kernel now.
func (g *viewGen) behind() Behind {
	if g.log == nil || !g.set {
		return Behind{}
	}
	n, since := g.log.CommittedAfter(g.published)
	return Behind{Commits: n, Since: since}
}
