package cli

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/nodecheck/fromapi"
	"github.com/netdrift/netdrift/internal/watch"
)

// vipBackends is one Service address given to trace-rsts and the backends
// watched in its place: a VIP neither sends nor receives resets, its
// backends do.
type vipBackends struct {
	IP       string   `json:"ip"`
	Service  string   `json:"service"` // namespace/name
	Backends []string `json:"backends"`
}

// resolveVIPs replaces every address of ips that is a Service's cluster,
// external or load-balancer IP in cs by the addresses of that Service's
// endpoints (all of them, terminating ones included: their resets are the
// ones that matter). port, when not 0, is taken as the Service's port and
// becomes its endpoints' port. Addresses that are no Service's stay as
// they are. A VIP whose Service has no endpoint is refused: nothing could
// be counted for it.
func resolveVIPs(cs *watch.ClusterState, ips []netip.Addr, port uint16) ([]netip.Addr, uint16, []vipBackends, error) {
	var out []netip.Addr
	var resolved []vipBackends
	seen := map[netip.Addr]bool{}
	add := func(a netip.Addr) {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	outPort := port
	for _, ip := range ips {
		svc := serviceOf(cs, ip)
		if svc == nil {
			add(ip)
			continue
		}
		name := svc.Namespace + "/" + svc.Name
		backends, epPort, err := backendsOf(cs, svc, port)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("--ip %s is Service %s's address: %w", ip, name, err)
		}
		if len(backends) == 0 {
			return nil, 0, nil, fmt.Errorf("--ip %s is Service %s's address, and that Service has no endpoints: no backend to watch", ip, name)
		}
		if port != 0 {
			outPort = epPort
		}
		vb := vipBackends{IP: ip.String(), Service: name}
		for _, b := range backends {
			add(b)
			vb.Backends = append(vb.Backends, b.String())
		}
		resolved = append(resolved, vb)
	}
	return out, outPort, resolved, nil
}

// serviceOf is the Service one of whose addresses ip is, or nil.
func serviceOf(cs *watch.ClusterState, ip netip.Addr) *corev1.Service {
	for _, s := range cs.Services {
		if slices.Contains(fromapi.ServiceIPs([]*corev1.Service{s}), ip) {
			return s
		}
	}
	return nil
}

// backendsOf lists the endpoint addresses of svc's EndpointSlices, sorted.
// With port set it keeps the endpoints of the service port of that number
// and returns their port, refusing a port the Service does not have or one
// whose endpoints listen on different ports.
func backendsOf(cs *watch.ClusterState, svc *corev1.Service, port uint16) ([]netip.Addr, uint16, error) {
	portName, hasPort := "", false
	for _, p := range svc.Spec.Ports {
		if port != 0 && p.Port == int32(port) {
			portName, hasPort = p.Name, true
		}
	}
	if port != 0 && !hasPort {
		return nil, 0, fmt.Errorf("the Service has no port %d (--port is the Service's port when --ip is its address)", port)
	}
	set := map[netip.Addr]bool{}
	epPorts := map[int32]bool{}
	for _, sl := range cs.EndpointSlices {
		if sl.Namespace != svc.Namespace || sl.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		if port != 0 && !slicePort(sl, portName, epPorts) {
			continue
		}
		for _, ep := range sl.Endpoints {
			for _, a := range ep.Addresses {
				if p, err := netip.ParseAddr(a); err == nil {
					set[p.Unmap()] = true
				}
			}
		}
	}
	if len(epPorts) > 1 {
		return nil, 0, fmt.Errorf("its port %d reaches endpoints on %d different ports: give a backend's address and port instead", port, len(epPorts))
	}
	var out []netip.Addr
	for a := range set {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	var epPort uint16
	for p := range epPorts {
		epPort = uint16(p)
	}
	return out, epPort, nil
}

// slicePort reports whether sl has the service port named name, noting its
// number in ports.
func slicePort(sl *discoveryv1.EndpointSlice, name string, ports map[int32]bool) bool {
	for _, p := range sl.Ports {
		if p.Port != nil && (p.Name == nil && name == "" || p.Name != nil && *p.Name == name) {
			ports[*p.Port] = true
			return true
		}
	}
	return false
}

// describeVIPs is the table's lines naming the backends watched for each
// Service address.
func describeVIPs(rs []vipBackends) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s is Service %s: watching its %d backends %s\n", r.IP, r.Service, len(r.Backends), strings.Join(r.Backends, ", "))
	}
	return b.String()
}
