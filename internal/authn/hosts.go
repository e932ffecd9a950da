package authn

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// ServingHosts are the names of the self-signed serving certificate: the
// node's name, loopback, and the node's addresses (the Node object's
// InternalIP, ExternalIP and Hostname addresses, and the addresses of
// this network namespace's interfaces: the host's, as the agent runs with
// hostNetwork), so that a client holding the certificate as its CA can
// verify https://NODE_IP:9761. A Node that cannot be read is logged: the
// interfaces' addresses still name the node.
func ServingHosts(ctx context.Context, nodes corev1client.NodeInterface, node string, log *slog.Logger) []string {
	hosts := []string{node, "localhost", "127.0.0.1", "::1"}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := nodes.Get(ctx, node, metav1.GetOptions{}); err != nil {
		log.Warn("serving certificate: the Node's addresses are not in it", "node", node, "err", err)
	} else {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP || a.Type == corev1.NodeHostName {
				hosts = append(hosts, a.Address)
			}
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
				hosts = append(hosts, ipn.IP.String())
			}
		}
	}
	slices.Sort(hosts[4:])
	return append(hosts[:4], slices.Compact(hosts[4:])...)
}
