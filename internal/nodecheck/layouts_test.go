package nodecheck

import "github.com/netdrift/netdrift/internal/model"

// CNI route layouts used by the rule tests. Each returns a healthy node "a"
// in a three-node cluster (a, b, c); tests break one thing and look.

func baseLinks() []model.Link {
	return []model.Link{
		link("lo", "device", "127.0.0.1/8", "::1/128"),
		link("eth0", "device", "192.168.1.10/24", "fd00:192::10/64"),
	}
}

func threeNodes(cidrA, cidrB, cidrC string) []model.NodeInfo {
	return []model.NodeInfo{
		node("a", cidrA, "192.168.1.10", "fd00:192::10"),
		node("b", cidrB, "192.168.1.11", "fd00:192::11"),
		node("c", cidrC, "192.168.1.12", "fd00:192::12"),
	}
}

func commonRoutes() []model.Route {
	return []model.Route{
		proto(via("0.0.0.0/0", "192.168.1.1", "eth0"), "dhcp"),
		proto(via("192.168.1.0/24", "", "eth0"), "kernel"),
		proto(via("fd00:192::/64", "", "eth0"), "kernel"),
		{Dst: pfx("192.168.1.10"), Type: model.RouteLocal, Table: 255, Protocol: "kernel", Dev: "eth0"},
	}
}

func bridgePods() ([]model.Link, []model.PodInfo) {
	ls := append(baseLinks(), link("cni0", "bridge", "10.244.0.1/24"),
		veth("veth1", 0, "10.244.0.5"), veth("veth2", 1, "10.244.0.6"))
	ls[3].Master, ls[4].Master = "cni0", "cni0"
	pods := []model.PodInfo{pod("shop", "cart-1", "a", "10.244.0.5"), pod("shop", "web-1", "a", "10.244.0.6"),
		pod("shop", "cart-2", "b", "10.244.1.7")}
	return ls, pods
}

// hostGW: flannel host-gw / kube-router style: podCIDR via node IP.
func hostGW() (Inputs, Config) {
	ls, pods := bridgePods()
	routes := append(commonRoutes(),
		proto(via("10.244.0.0/24", "", "cni0"), "kernel"),
		via("10.244.1.0/24", "192.168.1.11", "eth0"),
		via("10.244.2.0/24", "192.168.1.12", "eth0"),
	)
	in := Inputs{NodeName: "a", Nodes: threeNodes("10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"), Pods: pods,
		Snapshot: &model.NodeSnapshot{Routes: routes, Links: ls}}
	return in, Config{}
}

// flannelVXLAN: podCIDR via the remote VTEP address onlink over flannel.1.
func flannelVXLAN() (Inputs, Config) {
	ls, pods := bridgePods()
	ls = append(ls, link("flannel.1", "vxlan", "10.244.0.0/32"))
	ls[len(ls)-1].OperState = "unknown"
	routes := append(commonRoutes(),
		proto(via("10.244.0.0/24", "", "cni0"), "kernel"),
		onlink(via("10.244.1.0/24", "10.244.1.0", "flannel.1")),
		onlink(via("10.244.2.0/24", "10.244.2.0", "flannel.1")),
	)
	in := Inputs{NodeName: "a", Nodes: threeNodes("10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"), Pods: pods,
		Snapshot: &model.NodeSnapshot{Routes: routes, Links: ls}}
	return in, Config{}
}

// calicoIPIP: Calico IPAM blocks (/26, unrelated to Node podCIDRs), /32
// routes to cali* veths, a blackhole for the local block, remote blocks via
// node IPs over tunl0. The peer netns of cali veths is not resolved.
func calicoIPIP() (Inputs, Config) {
	ls := append(baseLinks(), link("tunl0", "ipip", "10.244.64.0/32"),
		veth("cali1111", 3), veth("cali2222", 4))
	routes := append(commonRoutes(),
		reject(model.RouteBlackhole, "10.244.64.0/26", "bird"),
		proto(via("10.244.64.1", "", "cali1111"), "static"),
		proto(via("10.244.64.2", "", "cali2222"), "static"),
		proto(onlink(via("10.244.100.0/26", "192.168.1.11", "tunl0")), "bird"),
		proto(onlink(via("10.244.200.0/26", "192.168.1.12", "tunl0")), "bird"),
	)
	pods := []model.PodInfo{pod("shop", "cart-1", "a", "10.244.64.1"), pod("shop", "web-1", "a", "10.244.64.2")}
	in := Inputs{NodeName: "a", Nodes: threeNodes("", "", ""), Pods: pods,
		Snapshot: &model.NodeSnapshot{Routes: routes, Links: ls}}
	return in, Config{ClusterCIDRs: prefixes("10.244.0.0/16")}
}

// calicoVXLAN: remote blocks via the remote vxlan.calico address (published
// in a node annotation, so part of the node's addresses), and Node podCIDRs
// allocated by kube-controller-manager that Calico does not use.
func calicoVXLAN() (Inputs, Config) {
	in, cfg := calicoIPIP()
	in.Nodes = threeNodes("10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24")
	in.Nodes[1].Addresses = append(in.Nodes[1].Addresses, addr("10.244.100.0"))
	in.Nodes[2].Addresses = append(in.Nodes[2].Addresses, addr("10.244.200.0"))
	s := in.Snapshot
	s.Links[2] = link("vxlan.calico", "vxlan", "10.244.64.0/32")
	s.Routes[len(s.Routes)-2] = proto(onlink(via("10.244.100.0/26", "10.244.100.0", "vxlan.calico")), "80")
	s.Routes[len(s.Routes)-1] = proto(onlink(via("10.244.200.0/26", "10.244.200.0", "vxlan.calico")), "80")
	return in, cfg
}

// ciliumTunnel: every podCIDR via the local cilium_host address, a
// blackhole-free local range, lxc* veths whose addresses are unknown.
func ciliumTunnel() (Inputs, Config) {
	host := link("cilium_host", "veth", "10.0.0.79/32")
	net := link("cilium_net", "veth")
	ls := append(baseLinks(), host, net, link("cilium_vxlan", "vxlan"), veth("lxc1234", 0))
	routes := append(commonRoutes(),
		proto(via("10.0.0.0/24", "10.0.0.79", "cilium_host"), "kernel"),
		proto(via("10.0.0.79", "", "cilium_host"), "kernel"),
		proto(via("10.0.1.0/24", "10.0.0.79", "cilium_host"), "kernel"),
		proto(via("10.0.2.0/24", "10.0.0.79", "cilium_host"), "kernel"),
	)
	in := Inputs{NodeName: "a", Nodes: threeNodes("10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"),
		Pods: []model.PodInfo{pod("shop", "cart-1", "a", "10.0.0.12")}, Snapshot: &model.NodeSnapshot{Routes: routes, Links: ls}}
	return in, Config{}
}

// nativeBlackhole: Cilium native routing / kube-router: remote podCIDRs via
// node IPs, a blackhole for the local podCIDR, /32 routes per pod.
func nativeBlackhole() (Inputs, Config) {
	in, cfg := hostGW()
	s := in.Snapshot
	s.Routes = append(commonRoutes(),
		reject(model.RouteBlackhole, "10.244.0.0/24", "static"),
		proto(via("10.244.0.5", "", "veth1"), "static"),
		proto(via("10.244.0.6", "", "veth2"), "static"),
		via("10.244.1.0/24", "192.168.1.11", "eth0"),
		via("10.244.2.0/24", "192.168.1.12", "eth0"),
	)
	s.Links = append(baseLinks(), veth("veth1", 0), veth("veth2", 1))
	return in, cfg
}

// dualStack: host-gw with IPv6 podCIDRs via node IPv6 addresses, and one
// IPv6 route via a link-local next hop.
func dualStack() (Inputs, Config) {
	in, cfg := hostGW()
	in.Nodes = threeNodes("10.244.0.0/24,fd00:10:244::/64", "10.244.1.0/24,fd00:10:244:1::/64",
		"10.244.2.0/24,fd00:10:244:2::/64")
	s := in.Snapshot
	s.Links[2].Addrs = append(s.Links[2].Addrs, pfx("fd00:10:244::1/64"))
	s.Links[3].PeerAddrs = append(s.Links[3].PeerAddrs, addr("fd00:10:244::5"), addr("fe80::1234"))
	in.Pods[0].IPs = append(in.Pods[0].IPs, addr("fd00:10:244::5"))
	s.Routes = append(s.Routes,
		proto(via("fd00:10:244::/64", "", "cni0"), "kernel"),
		via("fd00:10:244:1::/64", "fd00:192::11", "eth0"),
		via("fd00:10:244:2::/64", "fe80::c", "eth0"),
	)
	return in, cfg
}

type layout struct {
	name string
	fn   func() (Inputs, Config)
}

var layouts = []layout{
	{"host-gw", hostGW},
	{"flannel-vxlan", flannelVXLAN},
	{"calico-ipip", calicoIPIP},
	{"calico-vxlan", calicoVXLAN},
	{"cilium-tunnel", ciliumTunnel},
	{"native-blackhole", nativeBlackhole},
	{"dual-stack", dualStack},
}
