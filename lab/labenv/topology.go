package labenv

import (
	"fmt"
)

// setupRouter creates the router namespace: loopback (for etcd) and the
// bridge that joins the nodes, holding the control plane's address.
func setupRouter(name string) error {
	r := routerNS(name)
	if err := addNetns(r); err != nil {
		return err
	}
	if err := ipBatch(r,
		"link set lo up",
		"link add br0 type bridge",
		fmt.Sprintf("addr add %s/%d dev br0", routerIP, bridgeCIDRBits),
		"link set br0 up",
	); err != nil {
		return err
	}
	_, err := nsExec(r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	return err
}

// setupNode creates node i's namespace, plugs it into the bridge and gives
// it its node IP, a default route via the router and forwarding on.
func setupNode(name string, i int) error {
	r, ns := routerNS(name), nodeNS(name, i)
	if err := addNetns(ns); err != nil {
		return err
	}
	port := fmt.Sprintf("n%d", i)
	if err := ipBatch(r,
		fmt.Sprintf("link add %s type veth peer name eth0 netns %s", port, ns),
		fmt.Sprintf("link set %s master br0 up", port),
		fmt.Sprintf("route add %s via %s", podCIDR(i), nodeIP(i)),
	); err != nil {
		return err
	}
	if err := ipBatch(ns,
		"link set lo up",
		fmt.Sprintf("addr add %s/%d dev eth0", nodeIP(i), bridgeCIDRBits),
		"link set eth0 up",
		fmt.Sprintf("route add default via %s", routerIP),
	); err != nil {
		return err
	}
	_, err := nsExec(ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	return err
}

// addPodRoutes installs host-gw routes in node i for every other node's
// pod CIDR.
func addPodRoutes(name string, i, nodes int) error {
	var lines []string
	for j := 1; j <= nodes; j++ {
		if j != i {
			lines = append(lines, fmt.Sprintf("route replace %s via %s", podCIDR(j), nodeIP(j)))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return ipBatch(nodeNS(name, i), lines...)
}

// setupPodNet creates pod namespace podNS with a veth (hostIf in the node,
// eth0 in the pod), the pod IP as a /32, a /32 route in the node and a
// default route in the pod via the node's gateway address.
func setupPodNet(name string, node int, podNS, hostIf, ip string) error {
	ns := nodeNS(name, node)
	if err := addNetns(podNS); err != nil {
		return err
	}
	gw := podGateway(node).String()
	if err := ipBatch(ns,
		fmt.Sprintf("link add %s type veth peer name eth0 netns %s", hostIf, podNS),
		fmt.Sprintf("addr add %s/32 dev %s", gw, hostIf),
		fmt.Sprintf("link set %s up", hostIf),
		fmt.Sprintf("route add %s/32 dev %s scope link", ip, hostIf),
	); err != nil {
		return err
	}
	return ipBatch(podNS,
		"link set lo up",
		fmt.Sprintf("addr add %s/32 dev eth0", ip),
		"link set eth0 up",
		fmt.Sprintf("route add %s dev eth0 scope link", gw),
		fmt.Sprintf("route add default via %s dev eth0", gw),
	)
}

// teardownPodNet removes the pod's veth (from the node) and its namespace.
func teardownPodNet(name string, node int, podNS, hostIf string) error {
	_ = ipCmd("-n", nodeNS(name, node), "link", "del", hostIf) // gone with the node is fine
	return delNetns(podNS)
}
