package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// Prefixes of the per-service chains kube-proxy's iptables mode writes.
const (
	chainPrefixSVC = "KUBE-SVC-" // Cluster traffic policy dispatch
	chainPrefixSVL = "KUBE-SVL-" // Local traffic policy dispatch
	chainPrefixEXT = "KUBE-EXT-" // external destinations (node ports, external and LB IPs)
	chainPrefixFW  = "KUBE-FW-"  // loadBalancerSourceRanges firewall
	chainPrefixXLB = "KUBE-XLB-" // before v1.24: external traffic of a Local-policy service
	chainPrefixSEP = "KUBE-SEP-" // one endpoint (DNAT)
)

// KubeProxyPortName is the service port name as kube-proxy spells it in rule
// comments and hashes: "ns/name:port", or "ns/name" for an unnamed port.
// (model.ServicePort.String keeps the colon; kube-proxy does not.)
func KubeProxyPortName(sp model.ServicePort) string {
	s := sp.Namespace + "/" + sp.Name
	if sp.Port != "" {
		s += ":" + sp.Port
	}
	return s
}

// ChainHash is the 16-character suffix kube-proxy's iptables mode gives the
// KUBE-SVC/SVL/EXT/FW chains of a service port: the first 16 characters of the
// standard base32 encoding of sha256(portName + lowercase protocol).
func ChainHash(sp model.ServicePort) string {
	sum := sha256.Sum256([]byte(KubeProxyPortName(sp) + strings.ToLower(string(sp.Protocol))))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// legacyChainHash is ChainHash as kube-proxy v1.12 and older computed it:
// an unnamed port's name kept its trailing colon ("ns/name:").
func legacyChainHash(sp model.ServicePort) string {
	sum := sha256.Sum256([]byte(sp.Namespace + "/" + sp.Name + ":" + sp.Port + strings.ToLower(string(sp.Protocol))))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// EndpointChainHash is the suffix of a KUBE-SEP chain: the same hash over the
// port name, lowercase protocol and the endpoint's "ip:port" ("[ip]:port" for IPv6).
func EndpointChainHash(sp model.ServicePort, endpoint string) string {
	sum := sha256.Sum256([]byte(KubeProxyPortName(sp) + strings.ToLower(string(sp.Protocol)) + endpoint))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// chainHashOf returns the hash suffix of a per-service chain name and its
// prefix, or "" when the name is not one of kube-proxy's service chains.
func chainHashOf(chain string) (prefix, hash string) {
	for _, p := range []string{chainPrefixSVC, chainPrefixSVL, chainPrefixEXT, chainPrefixFW, chainPrefixXLB, chainPrefixSEP} {
		if strings.HasPrefix(chain, p) {
			return p, chain[len(p):]
		}
	}
	return "", ""
}

// parseKubePortName parses "ns/name:port" or "ns/name" (kube-proxy's form).
func parseKubePortName(s string, proto model.Protocol) (model.ServicePort, bool) {
	slash := strings.IndexByte(s, '/')
	if slash <= 0 || slash == len(s)-1 {
		return model.ServicePort{}, false
	}
	ns, rest := s[:slash], s[slash+1:]
	name, port := rest, ""
	if c := strings.IndexByte(rest, ':'); c >= 0 {
		name, port = rest[:c], rest[c+1:]
	}
	if name == "" || strings.ContainsAny(ns+name+port, " /:") {
		return model.ServicePort{}, false
	}
	return model.ServicePort{ServiceName: model.ServiceName{Namespace: ns, Name: name}, Port: port, Protocol: proto}, true
}
