package nodecheck

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

type ipKey struct {
	ip    netip.Addr
	port  uint16
	proto model.Protocol
}

type npKey struct {
	fam   model.IPFamily
	port  uint16
	proto model.Protocol
}

// ConntrackIndex classifies conntrack flows against the frontends kube-proxy
// must program. Build it once per desired state; Classify is cheap, so it
// also serves conntrack NEW events.
type ConntrackIndex struct {
	desired   map[model.Frontend]model.Verdict
	byIP      map[ipKey]model.Frontend
	nodePorts map[npKey]model.Frontend
	local     map[netip.Addr]bool
}

// NewConntrackIndex indexes desired frontends; local holds the node's own
// addresses (node ports answer on any of them).
func NewConntrackIndex(desired map[model.Frontend]model.Verdict, local map[netip.Addr]bool) *ConntrackIndex {
	x := &ConntrackIndex{desired: desired, byIP: make(map[ipKey]model.Frontend, len(desired)), nodePorts: map[npKey]model.Frontend{}, local: local}
	// Where frontends share a key the least (model.Frontend.Less) wins:
	// the same as taking the first in sorted order, without sorting them
	// all on every run.
	for fe := range desired {
		if fe.Kind == model.NodePort || !fe.IP.IsValid() {
			k := npKey{fe.Family, fe.Port, fe.Protocol}
			if old, dup := x.nodePorts[k]; !dup || fe.Less(old) {
				x.nodePorts[k] = fe
			}
			continue
		}
		k := ipKey{fe.IP.Unmap(), fe.Port, fe.Protocol}
		if old, dup := x.byIP[k]; !dup || fe.Less(old) {
			x.byIP[k] = fe
		}
	}
	return x
}

// Frontend returns the frontend a flow was sent to, if any.
func (x *ConntrackIndex) Frontend(f model.Flow) (model.Frontend, bool) {
	dst := f.Orig.Dst
	a := dst.Addr().Unmap()
	if fe, ok := x.byIP[ipKey{a, dst.Port(), f.Protocol}]; ok {
		return fe, true
	}
	if x.local[a] {
		fe, ok := x.nodePorts[npKey{model.FamilyOf(a), dst.Port(), f.Protocol}]
		return fe, ok
	}
	return model.Frontend{}, false
}

// Classify reports whether f is a live flow to a Service frontend that was
// DNATed to an address that is not a backend of it any more. An address the
// API still lists as an endpoint of the service port (ready or not,
// terminating or not) is not stale: its pod still exists. Uncertain
// frontends are never stale.
func (x *ConntrackIndex) Classify(f model.Flow) (fe model.Frontend, stale bool) {
	if !maybeStale(f) {
		return model.Frontend{}, false
	}
	fe, ok := x.Frontend(f)
	if !ok {
		return fe, false
	}
	v := x.desired[fe]
	if v.Uncertain != "" {
		return fe, false
	}
	b := netip.AddrPortFrom(f.Reply.Src.Addr().Unmap(), f.Reply.Src.Port())
	if v.HasBackend(b) {
		return fe, false
	}
	if _, known := v.Endpoint(b); known {
		return fe, false
	}
	return fe, true
}

type staleGroup struct {
	fe       model.Frontend
	backends map[netip.AddrPort]int
	example  map[netip.AddrPort]model.Flow
	states   map[string]int // TCP state -> entries counted
	halfOpen int            // TCP entries to a dead backend not counted (never answered)
	total    int
}

// carriesTraffic reports whether a conntrack entry still carries a
// conversation: TCP entries past the handshake (SYN_RECV, ESTABLISHED and
// the closing states before TIME_WAIT), and every UDP or SCTP entry. A
// SYN_SENT entry is a client that sent a SYN the dead backend never
// answered: it carries nothing and expires by itself, so the snapshot rule
// does not count it (conntrack NEW events still count new connections).
func carriesTraffic(f model.Flow) bool {
	if f.Protocol != model.TCP {
		return true
	}
	switch f.TCPState {
	case "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT", "LAST_ACK", "":
		return true // "": a reader that gives no TCP state; counted, as a flow that may carry traffic
	}
	return false
}

// NeedsDesired reports whether the conntrack rule reads the desired state
// for this snapshot: whether a flow may be stale.
func NeedsDesired(s *model.NodeSnapshot) bool {
	return slices.ContainsFunc(s.Flows, maybeStale)
}

// maybeStale: a flow Classify looks further at (live, DNATed, not closing).
func maybeStale(f model.Flow) bool {
	return !f.Dying && f.DNATed() && f.TCPState != "TIME_WAIT" && f.TCPState != "CLOSE"
}

// conntrackRule produces one stale_conntrack finding per frontend.
func conntrackRule(w *world, in Inputs, s *model.NodeSnapshot, info *Info) []model.Finding {
	switch {
	case in.Desired == nil:
		info.Skipped = append(info.Skipped, "stale_conntrack: desired state unknown")
		return nil
	case s.ConntrackUnavailable != "":
		info.Skipped = append(info.Skipped, "stale_conntrack: "+s.ConntrackUnavailable)
		return nil
	}
	info.FlowsChecked += len(s.Flows)
	if !NeedsDesired(s) {
		return nil // no flow to classify: the index over every frontend is not built
	}
	x := NewConntrackIndex(in.Desired, w.localAddrs)
	groups := map[model.Frontend]*staleGroup{}
	for _, f := range s.Flows {
		fe, stale := x.Classify(f)
		if !stale {
			continue
		}
		g := groups[fe]
		if g == nil {
			g = &staleGroup{fe: fe, backends: map[netip.AddrPort]int{}, example: map[netip.AddrPort]model.Flow{}, states: map[string]int{}}
			groups[fe] = g
		}
		if !carriesTraffic(f) {
			g.halfOpen++
			continue
		}
		info.StaleConntrack[f.Protocol]++
		if f.Protocol == model.TCP {
			st := f.TCPState
			if st == "" {
				st = "state unknown"
			}
			g.states[st]++
		}
		b := f.Reply.Src
		g.backends[b]++
		g.total++
		if _, ok := g.example[b]; !ok {
			g.example[b] = f
		}
	}
	var out []model.Finding
	for fe, g := range groups {
		if g.total > 0 {
			out = append(out, staleConntrackFinding(g, in.Desired[fe]))
		}
	}
	return out
}

// countedStates says which TCP states were counted, and what was not.
func countedStates(g *staleGroup) string {
	if len(g.states) == 0 && g.halfOpen == 0 {
		return ""
	}
	names := make([]string, 0, len(g.states))
	for st := range g.states {
		names = append(names, st)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, st := range names {
		parts[i] = fmt.Sprintf("%s %d", st, g.states[st])
	}
	out := " (counted: " + strings.Join(parts, ", ")
	if g.halfOpen > 0 {
		out += "; not counted: " + plural(g.halfOpen, "SYN_SENT entry", "SYN_SENT entries") + " of clients the backend never answered"
	}
	return out + ")"
}

func staleConntrackFinding(g *staleGroup, v model.Verdict) model.Finding {
	bs := make([]netip.AddrPort, 0, len(g.backends))
	for b := range g.backends {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return model.AddrPortLess(bs[i], bs[j]) })
	var names, ev []string
	for _, b := range bs {
		names = append(names, b.String())
		ev = append(ev, fmt.Sprintf("backend %s: %s, e.g. %s", b, plural(g.backends[b], "entry", "entries"), g.example[b]))
	}
	svc := v.Service.String()
	if svc == "" {
		svc = "the service"
	}
	verb := "is no longer a backend"
	if len(bs) > 1 {
		verb = "are no longer backends"
	}
	send := " still send "
	if g.total == 1 {
		send = " still sends "
	}
	fe := g.fe
	proto := strings.ToUpper(string(fe.Protocol))
	return model.Finding{
		Kind:     model.StaleConntrack,
		Service:  v.Service,
		Frontend: &fe,
		Subject:  "conntrack " + strings.ToLower(proto) + " " + fe.String(),
		Detail: plural(g.total, proto+" conntrack entry", proto+" conntrack entries") + countedStates(g) + send + fe.String() +
			" to " + strings.Join(names, ", ") + ", which " + verb + " of " + svc +
			": those clients keep talking to a dead backend until the entries expire.",
		Evidence: ev,
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
