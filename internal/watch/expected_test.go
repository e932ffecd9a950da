package watch

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/model"
)

type expectedCase struct {
	name   string
	node   string // default node-a
	svcs   []*corev1.Service
	slices []*discoveryv1.EndpointSlice
	want   []string // summary lines, sorted (see line())
	// reasons: "kind addr" -> reason of that endpoint in that frontend kind's verdict.
	reasons map[string]string
	// uncertain: substring the first uncertain verdict must mention.
	uncertain string
}

const (
	cip = "ns/s:http cluster_ip 10.96.0.1:80/TCP -> "
)

func runExpected(t *testing.T, cases []expectedCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nodeName := c.node
			if nodeName == "" {
				nodeName = "node-a"
			}
			cs := &ClusterState{Services: c.svcs, EndpointSlices: c.slices, Nodes: defaultNodes()}
			d := Expected(nodeName, cs)
			got := summary(d, "ns")
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			checkReasons(t, d, c.reasons)
			checkUncertain(t, d, c.uncertain)
		})
	}
}

func checkReasons(t *testing.T, d model.Desired, reasons map[string]string) {
	t.Helper()
	for key, want := range reasons {
		kind, addr, _ := strings.Cut(key, " ")
		found := false
		for _, fe := range model.SortedFrontends(d.Frontends) {
			if string(fe.Kind) != kind {
				continue
			}
			if e, ok := findEndpoint(d.Frontends[fe], addr); ok {
				found = true
				if e.Reason != want {
					t.Errorf("%s: reason %q, want %q", key, e.Reason, want)
				}
				if e.Included != (want == reasonReady || want == reasonFallback) {
					t.Errorf("%s: Included=%v with reason %q", key, e.Included, e.Reason)
				}
			}
		}
		if !found {
			t.Errorf("%s: endpoint not listed", key)
		}
	}
}

func checkUncertain(t *testing.T, d model.Desired, want string) {
	t.Helper()
	for _, fe := range model.SortedFrontends(d.Frontends) {
		u := d.Frontends[fe].Uncertain
		if u == "" {
			continue
		}
		if want == "" {
			t.Errorf("%s: unexpected uncertainty %q", fe, u)
		} else if !strings.Contains(u, want) {
			t.Errorf("%s: uncertainty %q does not mention %q", fe, u, want)
		}
		return
	}
	if want != "" {
		t.Errorf("no verdict is uncertain; want one mentioning %q", want)
	}
}

func TestExpected(t *testing.T) {
	var cases []expectedCase
	cases = append(cases, selectionCases()...)
	cases = append(cases, conditionCases()...)
	cases = append(cases, policyCases()...)
	cases = append(cases, topologyCases()...)
	cases = append(cases, frontendCases()...)
	cases = append(cases, uncertainCases()...)
	runExpected(t, cases)
}

// Which services and slices kube-proxy watches at all.
func selectionCases() []expectedCase {
	ready := []discoveryv1.Endpoint{ep("10.1.0.1", "node-a")}
	return []expectedCase{
		{name: "only_slices_with_service_name_label",
			svcs: []*corev1.Service{svc("s")},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ready...), func(s *discoveryv1.EndpointSlice) {
				delete(s.Labels, discoveryv1.LabelServiceName)
			})},
			want: []string{cip + "reject"}},
		{name: "slice_labelled_service_proxy_name_skipped",
			svcs:   []*corev1.Service{svc("s")},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ready...), sliceLabel(labelServiceProxyName, "other"))},
			want:   []string{cip + "reject"}},
		{name: "slice_labelled_headless_skipped",
			svcs:   []*corev1.Service{svc("s")},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ready...), sliceLabel(labelHeadless, ""))},
			want:   []string{cip + "reject"}},
		{name: "slice_of_other_namespace_ignored",
			svcs: []*corev1.Service{svc("s")},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ready...), func(s *discoveryv1.EndpointSlice) {
				s.Namespace = "other"
			})},
			want: []string{cip + "reject"}},
		{name: "service_labelled_service_proxy_name_skipped",
			svcs:   []*corev1.Service{svc("s", svcLabel(labelServiceProxyName, "other"))},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ready...)}},
		{name: "service_labelled_headless_skipped",
			svcs:   []*corev1.Service{svc("s", svcLabel(labelHeadless, ""))},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ready...)}},
		{name: "headless_cluster_ip_none_skipped",
			svcs:   []*corev1.Service{svc("s", clusterIPs("None"))},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ready...)}},
		{name: "empty_cluster_ip_skipped",
			svcs: []*corev1.Service{svc("s", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil })}},
		{name: "external_name_skipped",
			svcs: []*corev1.Service{svc("s", svcType(corev1.ServiceTypeExternalName))}},
		{name: "fqdn_slices_ignored",
			svcs:   []*corev1.Service{svc("s")},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ep("example.com", "node-a")), addrType(discoveryv1.AddressTypeFQDN))},
			want:   []string{cip + "reject"}},
	}
}

// How endpoint conditions and addresses are read.
func conditionCases() []expectedCase {
	s := []*corev1.Service{svc("s")}
	return []expectedCase{
		{name: "only_first_address_used", svcs: s,
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", "node-a", addrs("10.1.0.99")))},
			want:   []string{cip + "forward 10.1.0.1:8080"}},
		{name: "endpoint_without_address_ignored", svcs: s,
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", "node-a", func(e *discoveryv1.Endpoint) { e.Addresses = nil }))},
			want:   []string{cip + "reject"}},
		{name: "ready_nil_means_ready", svcs: s,
			slices:  []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", "node-a", cond(nil, nil, nil)))},
			want:    []string{cip + "forward 10.1.0.1:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.1:8080": reasonReady}},
		{name: "serving_nil_means_serving", svcs: s,
			slices:  []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", "node-a", cond(no, nil, yes)))},
			want:    []string{cip + "forward 10.1.0.1:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.1:8080": reasonFallback}},
		{name: "terminating_nil_means_not_terminating", svcs: s,
			slices:  []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", "node-a", cond(no, yes, nil)))},
			want:    []string{cip + "reject"},
			reasons: map[string]string{"cluster_ip 10.1.0.1:8080": reasonNotReady}},
		{name: "duplicate_ip_non_terminating_wins", svcs: s,
			slices: []*discoveryv1.EndpointSlice{
				slice("s-a", "s", ep("10.1.0.1", "node-a", terminatingGone)),
				slice("s-b", "s", ep("10.1.0.1", "node-a")),
				slice("s-c", "s", ep("10.1.0.1", "node-a", terminatingGone))},
			want:    []string{cip + "forward 10.1.0.1:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.1:8080": reasonReady}},
		{name: "endpoint_moving_between_slices_not_removed", svcs: s,
			slices: []*discoveryv1.EndpointSlice{
				slice("s-old", "s", ep("10.1.0.1", "node-a"), ep("10.1.0.2", "node-b")),
				slice("s-new", "s", ep("10.1.0.2", "node-b"))},
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080"}},
		{name: "named_target_port_resolves_by_slice_port_name",
			svcs: []*corev1.Service{svc("s", ports(
				corev1.ServicePort{Name: "grpc", Protocol: corev1.ProtocolTCP, Port: 9090},
				corev1.ServicePort{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9100}))},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ep("10.1.0.1", "node-a")),
				slicePorts(slicePort("metrics", 9100, corev1.ProtocolTCP), slicePort("grpc", 50051, corev1.ProtocolTCP)))},
			want: []string{
				"ns/s:grpc cluster_ip 10.96.0.1:9090/TCP -> forward 10.1.0.1:50051",
				"ns/s:metrics cluster_ip 10.96.0.1:9100/TCP -> forward 10.1.0.1:9100"}},
		{name: "slice_port_protocol_must_match", svcs: s,
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ep("10.1.0.1", "node-a")),
				slicePorts(slicePort("http", 8080, corev1.ProtocolUDP)))},
			want: []string{cip + "reject"}},
		{name: "slice_port_protocol_nil_means_tcp", svcs: s,
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ep("10.1.0.1", "node-a")),
				slicePorts(discoveryv1.EndpointPort{Name: ptr("http"), Port: ptr(int32(8080))}))},
			want: []string{cip + "forward 10.1.0.1:8080"}},
		{name: "slice_port_without_name_or_number_ignored", svcs: s,
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ep("10.1.0.1", "node-a")),
				slicePorts(discoveryv1.EndpointPort{Port: ptr(int32(8080))},
					discoveryv1.EndpointPort{Name: ptr("http"), Port: ptr(int32(0))},
					discoveryv1.EndpointPort{Name: ptr("http")}))},
			want: []string{cip + "reject"}},
		{name: "unnamed_service_port_matches_empty_slice_port_name",
			svcs: []*corev1.Service{svc("s", ports(corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: 80}))},
			slices: []*discoveryv1.EndpointSlice{with(slice("s-1", "s", ep("10.1.0.1", "node-a")),
				slicePorts(slicePort("", 8080, corev1.ProtocolTCP)))},
			want: []string{"ns/s cluster_ip 10.96.0.1:80/TCP -> forward 10.1.0.1:8080"}},
	}
}

// Cluster and Local policies, fallback, reject and drop.
func policyCases() []expectedCase {
	mixed := []*discoveryv1.EndpointSlice{slice("s-1", "s",
		ep("10.1.0.1", "node-a"), ep("10.1.0.2", "node-b"),
		ep("10.1.0.3", "node-a", terminatingServing), ep("10.1.0.4", "node-b", notReady),
		ep("10.1.0.5", "node-a", terminatingGone))}
	return []expectedCase{
		{name: "cluster_policy_ready_endpoints_only", svcs: []*corev1.Service{svc("s")}, slices: mixed,
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080"},
			reasons: map[string]string{
				"cluster_ip 10.1.0.1:8080": reasonReady, "cluster_ip 10.1.0.2:8080": reasonReady,
				"cluster_ip 10.1.0.3:8080": reasonTermReadyExist, "cluster_ip 10.1.0.4:8080": reasonNotReady,
				"cluster_ip 10.1.0.5:8080": reasonTermNotServing}},
		{name: "terminating_fallback_when_no_ready", svcs: []*corev1.Service{svc("s")},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.3", "node-a", terminatingServing), ep("10.1.0.4", "node-b", notReady),
				ep("10.1.0.5", "node-b", terminatingServing), ep("10.1.0.6", "node-b", terminatingGone))},
			want: []string{cip + "forward 10.1.0.3:8080 10.1.0.5:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.3:8080": reasonFallback,
				"cluster_ip 10.1.0.4:8080": reasonNotReady, "cluster_ip 10.1.0.6:8080": reasonTermNotServing}},
		{name: "reject_when_no_endpoints", svcs: []*corev1.Service{svc("s")},
			want: []string{cip + "reject"}},
		{name: "reject_when_no_ready_or_serving_terminating", svcs: []*corev1.Service{svc("s")},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.4", "node-b", notReady), ep("10.1.0.5", "node-a", terminatingGone))},
			want:   []string{cip + "reject"}},
		{name: "reject_with_local_policy_when_no_usable_endpoint_anywhere",
			svcs:   []*corev1.Service{svc("s", iTPLocal, nodePort(30080), eTPLocal)},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.4", "node-a", notReady))},
			want:   []string{cip + "reject", "ns/s:http node_port *:30080/TCP -> reject"}},
		{name: "internal_local_policy_local_ready_only", svcs: []*corev1.Service{svc("s", iTPLocal)}, slices: mixed,
			want: []string{cip + "forward 10.1.0.1:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.1:8080": reasonReady,
				"cluster_ip 10.1.0.2:8080": reasonNotLocal, "cluster_ip 10.1.0.3:8080": reasonTermLocalReady}},
		{name: "internal_local_policy_drop_when_none_local", node: "node-c",
			svcs: []*corev1.Service{svc("s", iTPLocal)}, slices: mixed,
			want: []string{cip + "drop"}},
		{name: "internal_local_policy_local_serving_terminating_fallback", node: "node-a",
			svcs: []*corev1.Service{svc("s", iTPLocal)},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s",
				ep("10.1.0.2", "node-b"), ep("10.1.0.3", "node-a", terminatingServing))},
			want:    []string{cip + "forward 10.1.0.3:8080"},
			reasons: map[string]string{"cluster_ip 10.1.0.3:8080": reasonFallback, "cluster_ip 10.1.0.2:8080": reasonNotLocal}},
		{name: "local_policy_endpoint_without_node_name_not_local",
			svcs:   []*corev1.Service{svc("s", iTPLocal)},
			slices: []*discoveryv1.EndpointSlice{slice("s-1", "s", ep("10.1.0.1", ""))},
			want:   []string{cip + "drop"}},
		{name: "internal_local_policy_external_frontends_use_cluster_set",
			svcs: []*corev1.Service{svc("s", iTPLocal, nodePort(30080), externalIPs("198.51.100.1"))}, slices: mixed,
			want: []string{cip + "forward 10.1.0.1:8080",
				"ns/s:http external_ip 198.51.100.1:80/TCP -> forward 10.1.0.1:8080 10.1.0.2:8080",
				"ns/s:http node_port *:30080/TCP -> forward 10.1.0.1:8080 10.1.0.2:8080"}},
		{name: "external_local_policy_external_frontends_local_only",
			svcs:   []*corev1.Service{svc("s", nodePort(30080), externalIPs("198.51.100.1"), lbIngress("192.0.2.1", nil), eTPLocal)},
			slices: mixed, node: "node-b",
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080",
				"ns/s:http external_ip 198.51.100.1:80/TCP -> forward 10.1.0.2:8080",
				"ns/s:http load_balancer 192.0.2.1:80/TCP -> forward 10.1.0.2:8080",
				"ns/s:http node_port *:30080/TCP -> forward 10.1.0.2:8080"},
			reasons: map[string]string{"node_port 10.1.0.1:8080": reasonNotLocal, "node_port 10.1.0.2:8080": reasonReady}},
		{name: "external_local_policy_drop_when_none_local",
			svcs: []*corev1.Service{svc("s", nodePort(30080), eTPLocal)}, slices: mixed, node: "node-c",
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080", "ns/s:http node_port *:30080/TCP -> drop"}},
		{name: "external_local_policy_applies_to_cluster_ip_service_with_external_ips",
			svcs: []*corev1.Service{svc("s", externalIPs("198.51.100.1"), eTPLocal)}, slices: mixed, node: "node-c",
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080", "ns/s:http external_ip 198.51.100.1:80/TCP -> drop"}},
		{name: "session_affinity_and_source_ranges_do_not_change_backends",
			svcs: []*corev1.Service{svc("s", lbIngress("192.0.2.1", nil), func(s *corev1.Service) {
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(10))}}
				s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
			})}, slices: mixed,
			want: []string{cip + "forward 10.1.0.1:8080 10.1.0.2:8080",
				"ns/s:http load_balancer 192.0.2.1:80/TCP -> forward 10.1.0.1:8080 10.1.0.2:8080"}},
	}
}
