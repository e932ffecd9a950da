package model

import (
	"errors"
	"sort"
)

// ErrUnsupported marks a source the node cannot provide (missing tool or
// kernel feature). Wrap it with the reason:
// fmt.Errorf("%w: no nft binary", model.ErrUnsupported).
var ErrUnsupported = errors.New("unsupported")

// Hints is what the API tells a datapath reader, the one type every reader
// takes (iptables, nftables, IPVS). Rules alone cannot always say which
// service a chain belongs to (large clusters drop comments; names are
// hashed or truncated) or which kind a frontend address is (an external IP
// and a load-balancer IP are programmed alike). The agent hands a reader
// new hints when the desired state changes; a reader never asks for them.
type Hints struct {
	// ServicePorts resolve hashed chain names (sorted, no duplicates).
	ServicePorts []ServicePort
	// Frontends known from the API and their service ports.
	Frontends map[Frontend]ServicePort
}

// HintsFor derives the hints from a desired state.
func HintsFor(d Desired) Hints {
	h := Hints{Frontends: make(map[Frontend]ServicePort, len(d.Frontends))}
	seen := map[ServicePort]bool{}
	for f, v := range d.Frontends {
		h.Frontends[f] = v.Service
		if !v.Service.IsZero() && !seen[v.Service] {
			seen[v.Service] = true
			h.ServicePorts = append(h.ServicePorts, v.Service)
		}
	}
	sort.Slice(h.ServicePorts, func(i, j int) bool {
		a, b := h.ServicePorts[i], h.ServicePorts[j]
		if a.String() != b.String() {
			return a.String() < b.String()
		}
		return a.Protocol < b.Protocol
	})
	return h
}

// Empty reports whether the hints carry nothing.
func (h Hints) Empty() bool { return len(h.Frontends) == 0 && len(h.ServicePorts) == 0 }
