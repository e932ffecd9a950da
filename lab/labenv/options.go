// Package labenv runs a small Kubernetes lab: real etcd, kube-apiserver,
// kube-controller-manager and one kube-proxy per node, with nodes and pods as
// Linux network namespaces and a kubelet stand-in in the calling process.
//
// Isolation: the lab lives entirely in network namespaces it creates. A
// dedicated router namespace ("ndlab-<name>-r") holds the bridge that joins the
// nodes, and runs etcd (on its own loopback) and the API server and
// controller manager (on the bridge address). The host's own links, routes
// and rules are never touched; the calling process reaches the API server
// and node addresses with a dialer that opens its sockets inside the lab
// namespaces (see DialContext).
package labenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Options configures a lab.
type Options struct {
	// Name identifies the lab; namespaces are named ndlab-<Name>-*. Short
	// ([a-z0-9], at most 12 characters). Default "lab".
	Name string
	// Nodes is the number of nodes (1..50). Default 2.
	Nodes int
	// ProxyMode is kube-proxy's mode: "iptables" (default) or "nftables";
	// or "cilium": no kube-proxy, Cilium's load-balancer control plane
	// writes each node's service maps (cilium.go).
	ProxyMode string
	// CiliumLB, in cilium mode, names per node ("node-1") the cilium-lb
	// binary in BinDir that node runs in place of "cilium-lb" (Cilium
	// v1.20.2), such as "cilium-lb-1.19.1" for cilium#48050.
	CiliumLB map[string]string
	// Dir holds certificates, data, logs and the state file. Default
	// $TMPDIR/netdrift-lab-<Name>. It is removed by Stop.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and
	// kube-proxy. Default: the lab module's .cache/bin.
	BinDir string
	// Agent, when set, is the path of the netdrift binary; the lab starts
	// "<Agent> agent --node-name N --kubeconfig K --listen <nodeIP>:9760"
	// plus AgentArgs inside every node namespace.
	Agent     string
	AgentArgs []string
	// AgentEnv are extra environment variables of the agents (KEY=VALUE),
	// such as the GOMAXPROCS the DaemonSet's CPU limit gives it.
	AgentEnv []string
	// DeferAgents: with Agent set, Start does not start the agents; the
	// caller starts each with StartAgent (e.g. to time the agent's start-up
	// against a table kube-proxy already holds).
	DeferAgents bool
	// ProxyArgs are extra kube-proxy flags (e.g. "--iptables-min-sync-period=0").
	ProxyArgs []string
	// ServiceAccountAdmission enables the API server's ServiceAccount admission plugin
	// (off by default: the stand-in's pods mount nothing), for pods a real kubelet runs.
	ServiceAccountAdmission bool
	// IPTablesBackend picks the iptables kube-proxy runs in iptables mode:
	// "" (the host's `iptables`, on Debian the nft backend), "nft" or
	// "legacy". kube-proxy execs iptables, iptables-save and
	// iptables-restore (and the ip6tables ones) from PATH; for "nft" and
	// "legacy" its PATH starts with a directory of links to the
	// iptables-<backend> commands.
	IPTablesBackend string
	// Prometheus starts Prometheus (PrometheusBin, default the Debian
	// package's `prometheus` from PATH) in the router namespace, scraping
	// every agent and kube-proxy each ScrapeInterval (default 2s) and
	// evaluating RuleFiles (default: deploy/'s rules file, unmodified) as
	// often. Its data directory is under Dir.
	Prometheus     bool
	PrometheusBin  string
	ScrapeInterval time.Duration
	RuleFiles      []string
	// LeasePeriod is how often the kubelet stand-in renews node Leases.
	// Default 10s.
	LeasePeriod time.Duration
	// Logf receives progress lines. Default: discard.
	Logf func(format string, args ...any)
}

var nameRE = regexp.MustCompile(`^[a-z0-9]{1,12}$`)

// Fixed lab addressing. Every lab has its own router namespace, so labs
// running side by side may reuse the same addresses.
const (
	routerIP            = "10.99.0.1"
	bridgeCIDRBits      = 24
	serviceCIDR         = "10.96.0.0/16"
	kubernetesServiceIP = "10.96.0.1"
	clusterCIDR         = "10.244.0.0/16"
	apiPort             = 6443
	// AgentPort is where the netdrift agent listens on each node IP.
	AgentPort = 9760
)

func (o *Options) setDefaults() error {
	if o.Name == "" {
		o.Name = "lab"
	}
	if !nameRE.MatchString(o.Name) {
		return fmt.Errorf("lab name %q: want 1-12 characters [a-z0-9]", o.Name)
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.Nodes < 1 || o.Nodes > 50 {
		return fmt.Errorf("nodes %d: want 1..50", o.Nodes)
	}
	switch o.ProxyMode {
	case "":
		o.ProxyMode = "iptables"
	case "iptables", "nftables", "cilium":
	default:
		return fmt.Errorf("proxy mode %q: want iptables, nftables or cilium", o.ProxyMode)
	}
	if err := o.checkCiliumLB(); err != nil {
		return err
	}
	switch o.IPTablesBackend {
	case "", "nft", "legacy":
	default:
		return fmt.Errorf("iptables backend %q: want nft or legacy", o.IPTablesBackend)
	}
	if o.Dir == "" {
		o.Dir = DefaultDir(o.Name)
	}
	if o.BinDir == "" {
		o.BinDir = DefaultBinDir()
	}
	if o.LeasePeriod == 0 {
		o.LeasePeriod = 10 * time.Second
	}
	if err := o.prometheusDefaults(); err != nil {
		return err
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// DefaultDir is where a lab named name keeps its files and state.
func DefaultDir(name string) string {
	return filepath.Join(os.TempDir(), "netdrift-lab-"+name)
}

// nsPrefix is the prefix of every network namespace of the lab.
func nsPrefix(name string) string { return "ndlab-" + name + "-" }

func routerNS(name string) string      { return nsPrefix(name) + "r" }
func nodeNS(name string, i int) string { return fmt.Sprintf("%sn%d", nsPrefix(name), i) }
func nodeName(i int) string            { return fmt.Sprintf("node-%d", i) }
func nodeIP(i int) net.IP              { return net.IPv4(10, 99, 0, byte(10+i)).To4() }
func podCIDR(i int) *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, 244, byte(i), 0).To4(), Mask: net.CIDRMask(24, 32)}
}
func podGateway(i int) net.IP { return net.IPv4(10, 244, byte(i), 1).To4() }
func apiServerURL() string    { return fmt.Sprintf("https://%s:%d", routerIP, apiPort) }

// checkCiliumLB: CiliumLB only in cilium mode, keyed by this lab's node
// names, naming plain files (looked up in BinDir).
func (o *Options) checkCiliumLB() error {
	if len(o.CiliumLB) > 0 && o.ProxyMode != "cilium" {
		return fmt.Errorf("per-node cilium-lb binaries need proxy mode cilium, not %q", o.ProxyMode)
	}
	for node, bin := range o.CiliumLB {
		var i int
		if _, err := fmt.Sscanf(node, "node-%d", &i); err != nil || nodeName(i) != node || i < 1 || i > o.Nodes {
			return fmt.Errorf("cilium-lb binary for %q: not a node of this lab (node-1..node-%d)", node, o.Nodes)
		}
		if bin == "" || filepath.Base(bin) != bin {
			return fmt.Errorf("cilium-lb binary %q for %s: want a file name in the lab's bin directory", bin, node)
		}
	}
	return nil
}
