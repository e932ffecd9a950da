package watch

import (
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
)

// endpoint is one endpoint of a service port as kube-proxy's cache sees it.
type endpoint struct {
	model.Endpoint
	zoneHints []string // sorted; nil = no zone hint
	nodeHints []string // sorted; nil = no node hint
	slice     string
	local     bool
	usable    bool // false: kube-proxy's handling is unknown (see Reason)
}

func (e *endpoint) servingTerminating() bool { return e.Serving && e.Terminating }

// portEndpoints is the merged endpoint set of one service port and family.
type portEndpoints struct {
	eps       []*endpoint // sorted by address
	uncertain []string    // why kube-proxy's result cannot be told
}

// collectEndpoints merges the endpoints of one service port (matched by the
// slice port's name and protocol, which is how named target ports resolve)
// from every slice of the service whose addressType is the family. Only
// addresses[0] counts. One ip:port in two slices: the non-terminating one
// wins, as in kube-proxy; a tie kube-proxy breaks by map order is uncertain.
func collectEndpoints(svc *corev1.Service, fam model.IPFamily, portName string, proto model.Protocol,
	slices []*discoveryv1.EndpointSlice, nodeName string) portEndpoints {
	var pe portEndpoints
	all := make([]endpoint, 0, countEndpoints(svc, fam, slices))
	for _, s := range slices {
		if !sliceForService(s, svc) || string(s.AddressType) != string(fam) {
			continue
		}
		for _, port := range matchingPorts(s.Ports, portName, proto) {
			for i := range s.Endpoints {
				ep, ok := newEndpoint(&s.Endpoints[i], s.Name, port, fam, nodeName)
				if !ok {
					continue
				}
				if !ep.usable {
					pe.uncertain = append(pe.uncertain, "slice "+s.Name+": endpoint "+s.Endpoints[i].Addresses[0]+": "+ep.Reason)
				}
				if ep.Addr.IsValid() { // else nothing to key or show it by; the uncertainty says why
					all = append(all, ep)
				}
			}
		}
	}
	sortEndpoints(all)
	pe.eps = make([]*endpoint, 0, len(all))
	for i := range all {
		if n := len(pe.eps); n > 0 && pe.eps[n-1].Addr == all[i].Addr {
			pe.eps[n-1] = mergeEndpoint(pe.eps[n-1], &all[i], &pe)
			continue
		}
		pe.eps = append(pe.eps, &all[i])
	}
	return pe
}

// sortEndpoints orders endpoints by address. The sort is stable: one
// ip:port's copies stay in the order their slices came, which is the order
// the de-duplication reads them in.
func sortEndpoints(all []endpoint) {
	slices.SortStableFunc(all, func(a, b endpoint) int { return model.AddrPortCompare(a.Addr, b.Addr) })
}

// countEndpoints bounds the endpoints collectEndpoints may keep, so that it
// allocates them once.
func countEndpoints(svc *corev1.Service, fam model.IPFamily, slices []*discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range slices {
		if sliceForService(s, svc) && string(s.AddressType) == string(fam) {
			n += len(s.Endpoints) * max(1, len(s.Ports))
		}
	}
	return n
}

func sliceForService(s *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	return s != nil && sliceWatched(s) && s.Namespace == svc.Namespace && s.Labels[labelServiceName] == svc.Name
}

// mergeEndpoint applies kube-proxy's de-duplication of one ip:port seen in
// several slices: prev came first; it returns the one kept.
func mergeEndpoint(prev, ep *endpoint, pe *portEndpoints) *endpoint {
	switch {
	case prev.Terminating && !ep.Terminating:
		return ep
	case !prev.Terminating && ep.Terminating:
		// the non-terminating one stays
	case !sameState(prev, ep):
		pe.uncertain = append(pe.uncertain, "endpoint "+ep.Addr.String()+" appears in slices "+prev.slice+" and "+
			ep.slice+" with different conditions; kube-proxy keeps either one")
	}
	return prev
}

func sameState(a, b *endpoint) bool {
	return a.Ready == b.Ready && a.Serving == b.Serving && a.Terminating == b.Terminating &&
		a.NodeName == b.NodeName && a.usable == b.usable &&
		strings.Join(a.zoneHints, ",") == strings.Join(b.zoneHints, ",") &&
		strings.Join(a.nodeHints, ",") == strings.Join(b.nodeHints, ",")
}

// matchingPorts returns the slice's port numbers for a service port. Ports
// without a name, without a number or numbered 0 are ignored, as kube-proxy
// does; a missing protocol is the API default, TCP.
func matchingPorts(ports []discoveryv1.EndpointPort, name string, proto model.Protocol) []uint16 {
	var out []uint16
	for _, p := range ports {
		if p.Name == nil || *p.Name != name || p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
			continue
		}
		pp := model.TCP
		if p.Protocol != nil {
			pp = model.Protocol(*p.Protocol)
		}
		if pp == proto {
			out = append(out, uint16(*p.Port))
		}
	}
	return out
}

// newEndpoint reads one API endpoint: ready nil = true, serving nil = true,
// terminating nil = false (kube-proxy's reading). Endpoints without an
// address are ignored; unparsable addresses or addresses of the other family
// are kept as unusable with the reason.
func newEndpoint(e *discoveryv1.Endpoint, slice string, port uint16, fam model.IPFamily, nodeName string) (endpoint, bool) {
	if len(e.Addresses) == 0 {
		return endpoint{}, false
	}
	ep := endpoint{slice: slice, usable: true}
	ep.Ready = e.Conditions.Ready == nil || *e.Conditions.Ready
	ep.Serving = e.Conditions.Serving == nil || *e.Conditions.Serving
	ep.Terminating = e.Conditions.Terminating != nil && *e.Conditions.Terminating
	if e.NodeName != nil {
		ep.NodeName = *e.NodeName
	}
	if e.Zone != nil {
		ep.Zone = *e.Zone
	}
	ep.local = nodeName != "" && ep.NodeName == nodeName
	ep.zoneHints, ep.nodeHints = hints(e.Hints)
	addr, err := netip.ParseAddr(e.Addresses[0])
	switch {
	case err != nil:
		ep.usable = false
		ep.Reason = "address " + e.Addresses[0] + " is not an IP address (uncertain)"
	case model.FamilyOf(addr) != fam || addr.Zone() != "":
		ep.usable = false
		ep.Reason = "address family does not match slice addressType " + string(fam) + " (uncertain)"
	}
	if addr.IsValid() {
		ep.Addr = netip.AddrPortFrom(addr.Unmap().WithZone(""), port)
	}
	return ep, true
}

func hints(h *discoveryv1.EndpointHints) (zones, nodes []string) {
	if h == nil {
		return nil, nil
	}
	for _, z := range h.ForZones {
		zones = append(zones, z.Name)
	}
	for _, n := range h.ForNodes {
		nodes = append(nodes, n.Name)
	}
	sort.Strings(zones)
	sort.Strings(nodes)
	return zones, nodes
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
