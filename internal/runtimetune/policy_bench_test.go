//go:build linux

package runtimetune

import (
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

var policyOnce sync.Once

// agentTables is what the agent keeps live between two audits: the watch
// cache, the desired state derived from it and the observed tables.
type agentTables struct {
	cluster  *watch.ClusterState
	desired  model.Desired
	observed model.Observed
}

// audit derives the desired state again and parses the dump again, as a
// full audit does, and replaces the kept ones: the old become garbage.
func (a *agentTables) audit(tb testing.TB, dump []byte) {
	a.desired = watch.Expected(bench.NodeName, a.cluster)
	obs, err := iptables.Parse(iptables.Dumps{IPv4: dump}, model.HintsFor(a.desired))
	if err != nil || len(obs.Frontends) == 0 {
		tb.Fatalf("parse: %d frontends, %v", len(obs.Frontends), err)
	}
	a.observed = obs
}

// processCPU is the user and system CPU time of the whole process (every
// thread: the GC's workers too), in nanoseconds.
func processCPU(tb testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkAgentPolicy runs full audits over the agent's long-lived tables
// under the memory policy Agent sets from this process's environment, so
// that two processes compare policies side by side: GOGC=100 (the tuner
// off) against GOGC unset (the tuner), each with the same GOMEMLIMIT. The
// process's peak RSS is read from outside (farm-bench). cpu-ms/op is the
// process's CPU per audit, the GC's workers included; gcs/op the
// collections per audit; peak-goal-MiB the largest heap goal seen (the heap
// size at which the next collection starts); live-MiB the live heap the
// last collection measured. RUNTIMETUNE_BENCH_WORK=churn makes each op a
// hundred audits of a ten-service cluster while the large tables stay live
// (the allocation of changes, small against the heap).
func BenchmarkAgentPolicy(b *testing.B) {
	policyOnce.Do(func() {
		if _, err := Agent(os.Getenv, CgroupRoot); err != nil {
			b.Log(err)
		}
	})
	churn := bench.Spec{Services: 10, Endpoints: 10}
	churnDump, churnCluster := []byte(churn.IPTablesRestore()), churn.ClusterState()
	for _, sc := range []struct {
		name string
		spec bench.Spec
	}{{"10k", bench.Scale10k}, {"100k", bench.Scale100k}} {
		b.Run(sc.name, func(b *testing.B) {
			dump := []byte(sc.spec.IPTablesRestore())
			a := &agentTables{cluster: sc.spec.ClusterState()}
			a.audit(b, dump)
			runtime.GC()
			s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
			metrics.Read(s)
			cycles0, cpu0, n := s[0].Value.Uint64(), processCPU(b), 0
			var peakGoal, live uint64
			for b.Loop() {
				if os.Getenv("RUNTIMETUNE_BENCH_WORK") == "churn" {
					// A change's work: small against the tables kept.
					for range 100 {
						c := &agentTables{cluster: churnCluster}
						c.audit(b, churnDump)
					}
				} else {
					a.audit(b, dump)
				}
				metrics.Read(s)
				peakGoal = max(peakGoal, s[1].Value.Uint64())
				live = s[2].Value.Uint64()
				n++
			}
			metrics.Read(s)
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(n)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(s[0].Value.Uint64()-cycles0)/float64(n), "gcs/op")
			b.ReportMetric(float64(peakGoal)/(1<<20), "peak-goal-MiB")
			b.ReportMetric(float64(live)/(1<<20), "live-MiB")
			runtime.KeepAlive(a)
		})
	}
}
