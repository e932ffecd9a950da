package watch

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Topology hints as kube-proxy v1.37 honours them (node hints first, then zone).
func topologyCases() []expectedCase {
	s := []*corev1.Service{svc("s")}
	zoned := func(extra ...discoveryv1.Endpoint) []*discoveryv1.EndpointSlice {
		eps := append([]discoveryv1.Endpoint{
			ep("10.1.0.1", "node-a", zoneHints("za")),
			ep("10.1.0.2", "node-b", zoneHints("zb")),
			ep("10.1.0.3", "node-b", zoneHints("za", "zb")),
		}, extra...)
		return []*discoveryv1.EndpointSlice{slice("s-1", "s", eps...)}
	}
	return []expectedCase{
		{name: "topology_zone_hints_honoured", svcs: s, slices: zoned(),
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.3:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.2:8080": reasonTopoOtherZone,
				"cluster_ip 10.1.0.3:8080": reasonReady}},
		{name: "topology_zone_hints_honoured_in_other_zone", svcs: s, slices: zoned(), node: "node-b",
			want: []string{cip + "forward 10.1.0.2:8080 10.1.0.3:8080"}},
		{name: "topology_zone_hints_ignored_when_a_ready_endpoint_lacks_a_hint", svcs: s,
			slices: zoned(ep("10.1.0.4", "node-b")),
			want:   []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080 10.1.0.3:8080 10.1.0.4:8080"}},
		{name: "topology_hints_of_not_ready_endpoints_do_not_matter", svcs: s,
			slices: zoned(ep("10.1.0.4", "node-b", notReady)),
			want:   []string{cip + "forward 10.1.0.1:8080 10.1.0.3:8080"}},
		{name: "topology_zone_hints_ignored_when_none_for_this_zone", svcs: s,
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.1", "node-a", zoneHints("zb")), ep("10.1.0.2", "node-b", zoneHints("zb")))},
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080"}},
		{name: "topology_zone_hints_ignored_without_node_zone_label", svcs: s, slices: zoned(), node: "node-c",
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080 10.1.0.3:8080"}},
		{name: "topology_zone_hints_ignored_for_unknown_node", svcs: s, slices: zoned(), node: "node-x",
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080 10.1.0.3:8080"}},
		{name: "topology_node_hints_prefer_same_node", svcs: s,
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.1", "node-a", nodeHints("node-a"), zoneHints("za")),
				ep("10.1.0.2", "node-b", nodeHints("node-b"), zoneHints("za")))},
			want:    []string{cip + "forward 10.1.0.1:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.2:8080": reasonTopoOtherNode}},
		{name: "topology_node_hints_fall_back_to_zone_when_none_for_this_node", svcs: s,
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.1", "node-b", nodeHints("node-b"), zoneHints("za")),
				ep("10.1.0.2", "node-c", nodeHints("node-c"), zoneHints("zb")))},
			want:    []string{cip + "forward 10.1.0.1:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.2:8080": reasonTopoOtherZone}},
		{name: "topology_node_and_zone_hints_ignored_when_neither_matches", svcs: s, node: "node-c",
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.1", "node-a", nodeHints("node-a"), zoneHints("zc")),
				ep("10.1.0.2", "node-b", nodeHints("node-b")))},
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080"}},
		{name: "topology_node_hints_ignored_when_a_ready_endpoint_lacks_one_zone_used", svcs: s,
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.1", "node-a", nodeHints("node-a"), zoneHints("zb")),
				ep("10.1.0.2", "node-b", zoneHints("za")))},
			want: []string{cip + "forward 10.1.0.2:8080"}},
		{name: "topology_not_applied_to_local_policy", svcs: []*corev1.Service{svc("s", iTPLocal)},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.1", "node-a", zoneHints("zb")), ep("10.1.0.2", "node-b", zoneHints("za")))},
			want: []string{cip + "forward 10.1.0.1:8080"}},
		{name: "topology_not_applied_to_serving_terminating_fallback", svcs: s,
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.1", "node-a", terminatingServing, zoneHints("zb")),
				ep("10.1.0.2", "node-b", terminatingServing, zoneHints("za")))},
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080"}},
	}
}

// Frontends per family and kind.
func frontendCases() []expectedCase {
	dual := func(opts ...svcOpt) []*corev1.Service {
		return []*corev1.Service{svc("s", append([]svcOpt{clusterIPs("10.96.0.1", "fd00::1"), func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		}}, opts...)...)}
	}
	dualSlices := []*discoveryv1.EndpointSlice{
		slice("s-v4", "s", ep("10.1.0.1", "node-a")),
		with(slice("s-v6", "s", ep("fd01::1", "node-a")), addrType(discoveryv1.AddressTypeIPv6)),
	}
	return []expectedCase{
		{name: "dual_stack_frontends_and_endpoints_per_family",
			svcs:   dual(nodePort(30080), externalIPs("198.51.100.1", "2001:db8::1"), lbIngress("192.0.2.1", nil), lbIngress("2001:db8::2", nil)),
			slices: dualSlices,
			want: []string{
				cip + "forward 10.1.0.1:8080",
				"ns/s:http cluster_ip [fd00::1]:80/TCP -> forward [fd01::1]:8080",
				"ns/s:http external_ip 198.51.100.1:80/TCP -> forward 10.1.0.1:8080",
				"ns/s:http external_ip [2001:db8::1]:80/TCP -> forward [fd01::1]:8080",
				"ns/s:http load_balancer 192.0.2.1:80/TCP -> forward 10.1.0.1:8080",
				"ns/s:http load_balancer [2001:db8::2]:80/TCP -> forward [fd01::1]:8080",
				"ns/s:http node_port *:30080/TCP -> forward 10.1.0.1:8080",
				"ns/s:http node_port *:30080/TCP -> forward [fd01::1]:8080",
			}},
		{name: "single_stack_ignores_other_family_ips_and_slices",
			svcs:   []*corev1.Service{svc("s", externalIPs("2001:db8::1"), lbIngress("2001:db8::2", nil))},
			slices: dualSlices,
			want:   []string{cip + "forward 10.1.0.1:8080"}},
		{name: "cluster_ip_used_when_cluster_ips_empty",
			svcs:   []*corev1.Service{svc("s", func(s *corev1.Service) { s.Spec.ClusterIPs = nil })},
			slices: dualSlices,
			want:   []string{cip + "forward 10.1.0.1:8080"}},
		{name: "load_balancer_ingress_proxy_mode_skipped",
			svcs: []*corev1.Service{svc("s",
				lbIngress("192.0.2.1", ptr(corev1.LoadBalancerIPModeProxy)),
				lbIngress("192.0.2.2", ptr(corev1.LoadBalancerIPModeVIP)),
				func(s *corev1.Service) {
					s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{Hostname: "lb.example"})
				})},
			slices: dualSlices,
			want: []string{cip + "forward 10.1.0.1:8080",
				"ns/s:http load_balancer 192.0.2.2:80/TCP -> forward 10.1.0.1:8080"}},
		{name: "node_port_only_when_set",
			svcs:   []*corev1.Service{svc("s", svcType(corev1.ServiceTypeNodePort))},
			slices: dualSlices,
			want:   []string{cip + "forward 10.1.0.1:8080"}},
		{name: "udp_and_tcp_on_same_port_are_separate_frontends",
			svcs: []*corev1.Service{svc("s", ports(
				corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
				corev1.ServicePort{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53}))},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ep("10.1.0.1", "node-a")),
				slicePorts(slicePort("dns", 5353, corev1.ProtocolUDP), slicePort("dns-tcp", 5354, corev1.ProtocolTCP)))},
			want: []string{
				"ns/s:dns cluster_ip 10.96.0.1:53/UDP -> forward 10.1.0.1:5353",
				"ns/s:dns-tcp cluster_ip 10.96.0.1:53/TCP -> forward 10.1.0.1:5354"}},
	}
}

// Where kube-proxy's behaviour cannot be told: uncertain, never wrong.
func uncertainCases() []expectedCase {
	return []expectedCase{
		{name: "uncertain_address_family_mismatch",
			svcs:      []*corev1.Service{svc("s")},
			slices:    []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", "node-a"), ep("fd01::1", "node-a"))},
			want:      []string{cip + "forward 10.1.0.1:8080 UNCERTAIN"},
			reasons:   map[string]string{"cluster_ip [fd01::1]:8080": "address family does not match slice addressType IPv4 (uncertain)"},
			uncertain: "address family"},
		{name: "uncertain_unparsable_address",
			svcs:      []*corev1.Service{svc("s")},
			slices:    []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", "node-a"), ep("not-an-ip", "node-a"))},
			want:      []string{cip + "forward 10.1.0.1:8080 UNCERTAIN"},
			uncertain: "not-an-ip"},
		{name: "uncertain_unknown_protocol",
			svcs: []*corev1.Service{svc("s", ports(corev1.ServicePort{Name: "http", Protocol: "QUIC", Port: 80}))},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ep("10.1.0.1", "node-a")),
				slicePorts(slicePort("http", 8080, "QUIC")))},
			want:      []string{"ns/s:http cluster_ip 10.96.0.1:80/QUIC -> forward 10.1.0.1:8080 UNCERTAIN"},
			uncertain: "protocol QUIC"},
		{name: "uncertain_duplicate_ip_with_conflicting_conditions",
			svcs: []*corev1.Service{svc("s")},
			slices: []*discoveryv1.EndpointSlice{
				slice("s-a", "s", ep("10.1.0.1", "node-a")),
				slice("s-b", "s", ep("10.1.0.1", "node-a", notReady))},
			want:      []string{cip + "forward 10.1.0.1:8080 UNCERTAIN"},
			uncertain: "different conditions"},
		{name: "uncertain_frontend_claimed_by_two_services",
			svcs: []*corev1.Service{svc("s", externalIPs("198.51.100.1")),
				svc("t", clusterIPs("10.96.0.2"), externalIPs("198.51.100.1"))},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", "node-a")), slice("t-1", "t", ep("10.1.0.2", "node-a"))},
			want: []string{cip + "forward 10.1.0.1:8080",
				"ns/s:http external_ip 198.51.100.1:80/TCP -> forward 10.1.0.1:8080 UNCERTAIN",
				"ns/t:http cluster_ip 10.96.0.2:80/TCP -> forward 10.1.0.2:8080"},
			uncertain: "claimed by services ns/s and ns/t"},
	}
}
