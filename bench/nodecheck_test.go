package bench

import (
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
	"github.com/netdrift/netdrift/internal/nodecheck/fromapi"
	"github.com/netdrift/netdrift/internal/watch"
)

// BenchmarkNodeChecks: the pure part of one node-level run (the agent's
// NodeSource every audit interval): the cluster state converted into
// nodecheck inputs and every rule run, on an empty kernel snapshot (the
// kernel reads are not in it). "cold" converts every EndpointSlice, as the
// first run does; "cached" is a later run with no slice changed (the
// EndpointInfoCache holds them all). CPU per run from rusage, GC included.
func BenchmarkNodeChecks(b *testing.B) {
	for _, sc := range scales {
		for _, cached := range []bool{false, true} {
			name := sc.name + "/cold"
			if cached {
				name = sc.name + "/cached"
			}
			b.Run(name, func(b *testing.B) { benchNodeChecks(b, sc.spec, cached) })
		}
	}
}

func benchNodeChecks(b *testing.B, s Spec, cached bool) {
	cs := s.ClusterState()
	desired := watch.Expected(NodeName, cs).Frontends
	snap := &model.NodeSnapshot{}
	var c fromapi.EndpointInfoCache
	fromapi.NodeCheckInputsCached(NodeName, cs, &c)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	n := 0
	for b.Loop() {
		var in nodecheck.Inputs
		if cached {
			in = fromapi.NodeCheckInputsCached(NodeName, cs, &c)
		} else {
			in = fromapi.NodeCheckInputs(NodeName, cs)
		}
		in.Desired, in.Snapshot = desired, snap
		if fs, _ := nodecheck.Check(in, nodecheck.Config{}, time.Now()); len(fs) != 0 {
			b.Fatalf("%d findings on a consistent cluster, first %+v", len(fs), fs[0])
		}
		n++
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(ms(cpu, n), "cpu-ms/run")
}
