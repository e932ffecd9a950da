// Command cilium-lb (Cilium v1.19.1) runs Cilium's own load-balancer control plane for one
// lab node: Cilium's Kubernetes reflectors (Services, EndpointSlices), its
// StateDB tables and its BPF reconciler, writing the real service maps
// pinned under a per-node bpffs (--bpf-root/tc/globals). It is the lab's
// stand-in for cilium-agent's kube-proxy replacement: the same code that
// writes the maps on a Cilium node, without the datapath programs. It
// builds against github.com/cilium/cilium (a module of its own: Cilium
// pulls k8s.io v0.36, the lab v0.37).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"

	daemonk8s "github.com/cilium/cilium/daemon/k8s"
	"github.com/cilium/cilium/pkg/bpf"
	cmtypes "github.com/cilium/cilium/pkg/clustermesh/types"
	"github.com/cilium/cilium/pkg/components"
	"github.com/cilium/cilium/pkg/datapath/tables"
	envoyCfg "github.com/cilium/cilium/pkg/envoy/config"
	"github.com/cilium/cilium/pkg/hive"
	"github.com/cilium/cilium/pkg/k8s/client"

	"github.com/cilium/cilium/pkg/kpr"
	"github.com/cilium/cilium/pkg/lbipamconfig"
	lbcell "github.com/cilium/cilium/pkg/loadbalancer/cell"
	"github.com/cilium/cilium/pkg/maglev"
	"github.com/cilium/cilium/pkg/metrics"
	"github.com/cilium/cilium/pkg/node"
	nodeTypes "github.com/cilium/cilium/pkg/node/types"
	"github.com/cilium/cilium/pkg/nodeipamconfig"
	"github.com/cilium/cilium/pkg/option"
	"github.com/cilium/cilium/pkg/source"
)

func main() {
	// Cilium's map code pins under the configured bpffs only in
	// cilium-agent itself (pkg/components, pkg/bpf.MapPath); any other
	// program pins under the first bpf mount it finds. This program is the
	// agent's load-balancer part, so it names itself as the agent does.
	os.Args[0] = components.CiliumAgentName
	h := hive.New(
		client.Cell,
		daemonk8s.ResourcesCell,
		daemonk8s.TablesCell,
		maglev.Cell,
		node.LocalNodeStoreTestCell,
		metrics.Cell,
		lbipamconfig.Cell,
		nodeipamconfig.Cell,
		cell.Config(envoyCfg.SecretSyncConfig{}),
		cell.Provide(
			func() cmtypes.ClusterInfo { return cmtypes.ClusterInfo{} },
			source.NewSources,
			tables.NewNodeAddressTable,
			statedb.RWTable[tables.NodeAddress].ToTable,
			func() *option.DaemonConfig { return &option.DaemonConfig{EnableIPv4: true, EnableIPv6: true} },
			func() kpr.KPRConfig { return kpr.KPRConfig{KubeProxyReplacement: true} },
		),
		lbcell.Cell,
	)
	fs := pflag.CommandLine
	fs.AddGoFlagSet(flag.CommandLine)
	bpfRoot := fs.String("bpf-root", "/sys/fs/bpf", "bpf filesystem to pin the service maps in (mounted there if it is not one)")
	nodeName := fs.String("node-name", "", "this node's name, as EndpointSlices name it (traffic policy Local)")
	h.RegisterFlags(fs)
	pflag.Parse()
	if *nodeName == "" {
		fmt.Fprintln(os.Stderr, "cilium-lb: --node-name is required")
		os.Exit(2)
	}
	nodeTypes.SetName(*nodeName)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	bpf.CheckOrMountFS(log, *bpfRoot)
	if err := h.Run(log); err != nil {
		fmt.Fprintln(os.Stderr, "cilium-lb:", err)
		os.Exit(1)
	}
}
