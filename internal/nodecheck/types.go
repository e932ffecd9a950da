// Package nodecheck holds netdrift's node-level staleness rules: routes,
// links and conntrack flows left behind when pods, nodes or backends go away,
// and endpoints that sit on vanished nodes. Everything here is pure: the
// kernel is read by internal/datapath/node (Read) and the API by
// internal/watch; both translate into the small types below.
package nodecheck

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// RouteMode says whether this node's CNI installs one route per node podCIDR.
type RouteMode string

const (
	RouteModeAuto    RouteMode = "auto"
	RouteModePerNode RouteMode = "per-node"
	RouteModeNone    RouteMode = "none"
)

// ParseRouteMode accepts auto, per-node and none ("" means auto).
func ParseRouteMode(s string) (RouteMode, error) {
	switch RouteMode(s) {
	case "", RouteModeAuto:
		return RouteModeAuto, nil
	case RouteModePerNode, RouteModeNone:
		return RouteMode(s), nil
	}
	return "", &ConfigError{Field: "route-mode", Value: s, Want: "auto, per-node or none"}
}

// ParseClusterCIDRs parses a comma-separated list of pod network CIDRs
// (--cluster-cidr of the agent and of diff); empty entries are skipped, each
// prefix is masked.
func ParseClusterCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR (want e.g. 10.244.0.0/16,fd00:10:244::/56)", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ConfigError is a bad setting.
type ConfigError struct{ Field, Value, Want string }

func (e *ConfigError) Error() string {
	return "invalid " + e.Field + " " + `"` + e.Value + `"` + ": want " + e.Want
}

// DefaultNodeGoneAfter is how long a node may be NotReady before its
// endpoints count as being on a missing node.
const DefaultNodeGoneAfter = 5 * time.Minute

// DefaultIPVSDevice is the dummy device kube-proxy's IPVS mode binds VIPs to.
const DefaultIPVSDevice = "kube-ipvs0"

// Config holds the settings of the node rules.
type Config struct {
	// ClusterCIDRs is the cluster's pod network. Empty: inferred from node
	// podCIDRs (each widened to at most 8 bits shorter), or local pod IPs.
	ClusterCIDRs  []netip.Prefix
	RouteMode     RouteMode     // "" = auto
	NodeGoneAfter time.Duration // 0 = DefaultNodeGoneAfter
	IPVSDevice    string        // "" = DefaultIPVSDevice
	// ExtraGateways are routers that legitimately appear as gateways of pod
	// routes (e.g. a top-of-rack BGP peer with next-hop-self).
	ExtraGateways []netip.Addr
}

func (c Config) nodeGoneAfter() time.Duration {
	if c.NodeGoneAfter <= 0 {
		return DefaultNodeGoneAfter
	}
	return c.NodeGoneAfter
}

func (c Config) ipvsDevice() string {
	if c.IPVSDevice == "" {
		return DefaultIPVSDevice
	}
	return c.IPVSDevice
}

// Inputs is everything the rules look at.
type Inputs struct {
	// NodeName is the node the snapshot was taken on.
	NodeName string
	// Nodes are all Node objects. Empty: node rules are skipped (RBAC, not synced).
	Nodes []model.NodeInfo
	// OwnNodeOnly: Nodes holds only NodeName's own Node (the agent's
	// --watch-nodes=own), so the rules that judge other nodes (stale_route,
	// missing_route, endpoint_on_missing_node) are skipped.
	OwnNodeOnly bool
	// Pods are the pods of NodeName (pods of other nodes are ignored), from
	// a synced cache: a missing pod makes its interface an orphan.
	Pods []model.PodInfo
	// Endpoints are all EndpointSlice endpoints of the cluster, flat or
	// (EndpointsBySlice) one list per slice, or both: every one is checked.
	Endpoints        []model.EndpointInfo
	EndpointsBySlice [][]model.EndpointInfo
	// Desired is what kube-proxy must program on this node; nil skips
	// the conntrack rule. Only that rule reads it, and only when
	// NeedsDesired(Snapshot): a caller that must copy it may pass an empty
	// map otherwise.
	Desired map[model.Frontend]model.Verdict
	// ServiceIPs are the IPs of every existing Service (cluster, external,
	// load-balancer IPs); used only when ServicesKnown.
	ServiceIPs    []netip.Addr
	ServicesKnown bool
	// Snapshot is this node's kernel state; nil checks only cluster-scope rules.
	Snapshot *model.NodeSnapshot
}

// RouteDecision is the route mode used for one address family, and why.
type RouteDecision struct {
	Family model.IPFamily
	Mode   RouteMode
	Reason string
}

// Info says what the rules looked at and decided.
type Info struct {
	PodNetwork       []netip.Prefix
	PodNetworkSource string // "cluster-cidr", "inferred from node podCIDRs", "inferred from pod IPs", ""
	RouteModes       []RouteDecision
	// StaleConntrack counts stale conntrack entries per protocol (TCP and UDP always present).
	StaleConntrack    map[model.Protocol]int
	RoutesChecked     int
	LinksChecked      int
	LinksUnattributed int // pod interfaces whose pod addresses could not be learned
	FlowsChecked      int
	// Skipped lists rules that did not run, with the reason.
	Skipped []string
}
