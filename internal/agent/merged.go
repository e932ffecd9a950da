package agent

import (
	"maps"

	"github.com/netdrift/netdrift/internal/model"
)

// mergedDesired is the node's whole desired state (every service's frontends
// in one map), updated in place per changed service: a change costs the
// service's frontends, not the cluster's. The live map is only used under the
// agent's lock; anything that keeps the desired state beyond it (published
// states, background node runs, reader hints) takes a frozen copy, made at
// most once per version.
type mergedDesired struct {
	live    map[model.Frontend]model.Verdict
	owner   map[model.Frontend]model.ServiceName // the service that set each frontend
	version uint64                               // bumped on every change of live
	frozen  map[model.Frontend]model.Verdict
	frozenV uint64
}

// rebuild starts over from every service's desired state, its maps sized
// for every frontend at once (no garbage of smaller tables at start-up).
func (m *mergedDesired) rebuild(bySvc map[model.ServiceName]map[model.Frontend]model.Verdict) {
	n := 0
	for _, fs := range bySvc {
		n += len(fs)
	}
	m.live, m.owner = make(map[model.Frontend]model.Verdict, n), make(map[model.Frontend]model.ServiceName, n)
	for svc, fs := range bySvc {
		m.replace(svc, nil, fs)
	}
	m.version++
}

// replace swaps one service's frontends prev for next. A frontend claimed by
// two services (a conflict the API server allows for external IPs) keeps the
// last writer; the other service's claim returns with its next change or the
// next rebuild.
func (m *mergedDesired) replace(svc model.ServiceName, prev, next map[model.Frontend]model.Verdict) {
	m.init()
	for fe := range prev {
		if _, ok := next[fe]; !ok && m.owner[fe] == svc {
			delete(m.live, fe)
			delete(m.owner, fe)
		}
	}
	for fe, v := range next {
		m.live[fe], m.owner[fe] = v, svc
	}
	m.version++
}

// current is the live state, valid under the agent's lock only.
func (m *mergedDesired) current(node string) model.Desired {
	m.init()
	return model.Desired{Node: node, Frontends: m.live}
}

// count is the number of frontends.
func (m *mergedDesired) count() int { return len(m.live) }

// snapshot is a copy that is never modified: copied again only after a change.
func (m *mergedDesired) snapshot(node string) model.Desired {
	if m.frozen == nil || m.frozenV != m.version {
		m.frozen, m.frozenV = maps.Clone(m.current(node).Frontends), m.version
	}
	return model.Desired{Node: node, Frontends: m.frozen}
}

func (m *mergedDesired) init() {
	if m.live == nil {
		m.live, m.owner = map[model.Frontend]model.Verdict{}, map[model.Frontend]model.ServiceName{}
	}
}
