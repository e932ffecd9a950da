package agent

import (
	"context"
	"sync"

	"k8s.io/utils/clock"

	nodestate "github.com/netdrift/netdrift/internal/datapath/node"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/nodecheck/fromapi"
	"github.com/netdrift/netdrift/internal/watch"
)

// NodeSourceConfig says where the node-level checks read and how they judge.
type NodeSourceConfig struct {
	Node     string
	NetNS    string // "" = the agent's own
	ProcPath string // host /proc, to find pod namespaces behind veths
	Check    nodecheck.Config
}

// NodeSource runs the node-level rules (routes, links, conntrack, endpoints
// on missing nodes) as a finding source: it reads the node's kernel state
// and hands it, with the cluster state, to internal/nodecheck.
type NodeSource struct {
	cfg   NodeSourceConfig
	clock clock.PassiveClock

	mu   sync.Mutex
	info nodecheck.Info
	// eps: the endpoints of the slices the last run saw, converted (runs
	// never overlap: startNodeRunLocked starts one at a time)
	eps fromapi.EndpointInfoCache
}

// NewNodeSource builds the node-level finding source.
func NewNodeSource(cfg NodeSourceConfig, clk clock.PassiveClock) *NodeSource {
	return &NodeSource{cfg: cfg, clock: clk}
}

// Name is the source's name in /v1/status.
func (n *NodeSource) Name() string { return "node" }

// Findings reads the node and runs the rules. When the kernel read fails, the
// cluster-scope findings (which need no kernel state) are still returned,
// beside the error.
func (n *NodeSource) Findings(ctx context.Context, cs *watch.ClusterState, desired func() model.Desired) ([]model.Finding, error) {
	in := fromapi.NodeCheckInputsCached(n.cfg.Node, cs, &n.eps)
	snap, err := nodestate.ReadWith(ctx, nodestate.Config{Netns: n.cfg.NetNS, ProcPath: n.cfg.ProcPath})
	in.Desired = noFrontends // nothing reads it: no flow may be stale
	if err == nil {
		in.Snapshot = &snap
		if nodecheck.NeedsDesired(&snap) {
			in.Desired = desired().Frontends
		}
	}
	f, info := nodecheck.Check(in, n.cfg.Check, n.clock.Now())
	n.mu.Lock()
	n.info = info
	n.mu.Unlock()
	return f, err
}

// noFrontends is the desired state handed to a run that does not read it
// (not nil: nil says the desired state is unknown).
var noFrontends = map[model.Frontend]model.Verdict{}

// Info is what the last run measured beside its findings (for metrics).
func (n *NodeSource) Info() nodecheck.Info {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.info
}
