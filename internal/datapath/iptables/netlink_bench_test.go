//go:build linux

package iptables_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// BenchmarkNFTReader: iptables-nft-save -t nat + -t filter (the reference:
// what the iptables-save path forks on every read) vs the in-process
// netlink reader on the same table in the same iteration: a full read
// (fresh reader: chains + every rule, decoded); update: a change event
// re-reading one service chain and one endpoint chain that did not change;
// change: one endpoint moved (its KUBE-SEP chain rewritten), the event's
// chains re-read, the frontends that reach them re-resolved (view.go) and
// the new state returned; sync: the same change with the entry chains a
// kube-proxy sync rewrites named too (re-read and diffed rule by rule);
// syncmsg: a real kube-proxy sync (its entry chains flushed and written
// again, one endpoint moved) delivered as it is live, the watcher carrying
// the rule messages and ApplyEvent patching the chains from them (syncrecv:
// the process's CPU until the events arrived, the watcher's share; an upper
// bound: the fork and wait of the restore are in it); walk: the whole-table
// walk of the cached tables every event needed before (forced by new hints). CPU time per op from rusage, the
// iptables-nft-restore that makes the change not counted; ratios are
// netlink / reference.
//
// The reference runs with a deadline (-nftsave-timeout): iptables-nft-save
// 1.8.9 is pathologically slow on restored copies at 100k endpoints
// (BENCHMARKS.md §1); past the deadline the ratio uses the deadline as a
// lower bound of the reference and says so (ref-timed-out=1).
func BenchmarkNFTReader(b *testing.B) {
	for _, sc := range []struct {
		name string
		spec bench.Spec
	}{{"10k", bench.Scale10k}, {"100k", bench.Scale100k}} {
		b.Run(sc.name, func(b *testing.B) { benchNFTReader(b, sc.spec) })
	}
}

const nftSaveTimeout = 120 * time.Second

// noNFTSave skips the iptables-nft-save reference (its ratios are then not
// meaningful): at 100k it only times out (BENCHMARKS.md).
var noNFTSave = flag.Bool("nftreader.nosave", false, "BenchmarkNFTReader: skip the iptables-nft-save reference")

// perChange endpoint changes are measured per iteration (and per kind).
const perChange = 10

func benchNFTReader(b *testing.B, s bench.Spec) {
	netnstest.RequireRoot(b, "loads generated tables into a fresh network namespace")
	for _, tool := range []string{"iptables-nft-restore", "iptables-nft-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not installed", tool)
		}
	}
	ns := netnstest.New(b, "nd-nlbench")
	restore := netnstest.Cmd(ns, "iptables-nft-restore")
	restore.Stdin = strings.NewReader(s.IPTablesRestore())
	if out, err := restore.CombinedOutput(); err != nil {
		b.Fatalf("iptables-nft-restore: %v: %s", err, out)
	}
	hints := model.HintsFor(watch.Expected(bench.NodeName, s.ClusterState()))
	svc, sep := oneServiceChains(b, s)
	changes := []nfevents.Change{{Family: "ip", Table: "nat", Object: "rule", Name: svc}, {Family: "ip", Table: "nat", Object: "rule", Name: sep}}
	// A kube-proxy sync names its entry chains too: it rewrites them every time.
	syncChanges := append(slices.Clone(changes),
		nfevents.Change{Family: "ip", Table: "nat", Object: "rule", Name: "KUBE-SERVICES"},
		nfevents.Change{Family: "ip", Table: "nat", Object: "rule", Name: "KUBE-NODEPORTS"},
		nfevents.Change{Family: "ip", Table: "filter", Object: "rule", Name: "KUBE-SERVICES"},
		nfevents.Change{Family: "ip", Table: "filter", Object: "rule", Name: "KUBE-EXTERNAL-SERVICES"},
		nfevents.Change{Family: "ip", Table: "filter", Object: "rule", Name: "KUBE-NODEPORTS"})
	var ref, full, update, change, sync, walk, syncRecv, syncMsg time.Duration
	var recvNoOps, recvBase time.Duration
	var msgStats iptables.NFTStats
	groups, changed, frontends := 0, 0, 0
	var alloc, syncAlloc uint64
	timedOut := false
	n := 0
	backend := 0
	moveEndpoint := func() uint32 { // the endpoint's DNAT target changes: one verdict differs
		backend++
		netnstest.RunInput(b, ns, fmt.Sprintf("*nat\n:%s - [0:0]\n-A %s -p tcp -m tcp -j DNAT --to-destination 10.255.%d.%d:8080\nCOMMIT\n",
			sep, sep, backend/250%250, backend%250), "iptables-nft-restore", "--noflush")
		gen, err := nfevents.Generation(ns)
		if err != nil {
			b.Fatal(err)
		}
		return gen
	}
	for b.Loop() {
		cpu, late := nftSaveBoth(b, ns)
		ref, timedOut = ref+cpu, timedOut || late
		nr := &iptables.NFTReader{NetNS: ns}
		var obs model.Observed
		var err error
		full += cpuOf(func() { obs, err = nr.Snapshot(context.Background(), hints) })
		if err != nil || len(obs.Frontends) < s.Services {
			b.Fatalf("full read: %v, %d frontends", err, len(obs.Frontends))
		}
		frontends = len(obs.Frontends)
		// The chains re-read, the verdicts not changed (the reader's share
		// of an event that changes nothing it observes).
		update += cpuOf(func() { err = nr.ApplyChanges(context.Background(), 0, false, changes) })
		if err != nil || nr.Stats().LastChains != 2 {
			b.Fatalf("update: %v, %d chains", err, nr.Stats().LastChains)
		}
		// One endpoint change: re-read the two chains, re-resolve the
		// frontends that reach them, the new state (Snapshot: no walk).
		// One forced GC per perChange changes: the GC of what they allocated,
		// amortized (a forced GC per change would charge each change a mark
		// of the whole live heap).
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for range perChange {
			gen := moveEndpoint()
			change += cpuNoGC(func() {
				if err = nr.ApplyChanges(context.Background(), gen, false, changes); err == nil {
					obs, err = nr.Snapshot(context.Background(), hints)
				}
			})
			st := nr.Stats()
			if err != nil || st.Walks != 1 || st.LastChanged == 0 || obs.Changed == nil {
				b.Fatalf("change: %v, stats %+v, changed %v", err, st, obs.Changed)
			}
			groups, changed = st.LastGroups, st.LastChanged
		}
		change += cpuOf(func() {})
		runtime.ReadMemStats(&m1)
		alloc += m1.TotalAlloc - m0.TotalAlloc
		// The same as kube-proxy's sync delivers it: the entry chains
		// (KUBE-SERVICES, ...) named too, re-read and diffed rule by rule.
		for range perChange {
			gen := moveEndpoint()
			sync += cpuNoGC(func() {
				if err = nr.ApplyChanges(context.Background(), gen, false, syncChanges); err == nil {
					obs, err = nr.Snapshot(context.Background(), hints)
				}
			})
			if st := nr.Stats(); err != nil || st.Walks != 1 || st.LastChanged == 0 {
				b.Fatalf("sync: %v, stats %+v", err, st)
			}
		}
		sync += cpuOf(func() {})
		// The same as it is live: a real kube-proxy sync (entry chains
		// flushed and rewritten, the endpoint's chain changed), its rule
		// messages carried by the watcher and patched into the chains.
		r, a, st, al := syncMsgs(b, ns, s, nr, hints, sep, &backend)
		syncRecv, syncMsg, msgStats, syncAlloc = syncRecv+r, syncMsg+a, st, syncAlloc+al
		r, a = recvCosts(b, ns, s, sep, &backend)
		recvNoOps, recvBase = recvNoOps+r, recvBase+a
		// The whole-table walk an event needed before (new hints force it).
		h2 := model.Hints{ServicePorts: slices.Clone(hints.ServicePorts), Frontends: hints.Frontends}
		walk += cpuOf(func() { obs, err = nr.Snapshot(context.Background(), h2) })
		if err != nil || nr.Stats().FullReads != 1 || nr.Stats().Walks != 2 {
			b.Fatalf("walk: %v, stats %+v", err, nr.Stats())
		}
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	b.ReportMetric(ms(ref), "nftsave-ms")
	b.ReportMetric(ms(full), "full-ms")
	b.ReportMetric(ms(update), "update-ms")
	b.ReportMetric(ms(change)/perChange, "change-ms")
	b.ReportMetric(ms(sync)/perChange, "sync-ms")
	b.ReportMetric(ms(syncMsg)/perChange, "syncmsg-ms")
	b.ReportMetric(ms(syncRecv)/perChange, "syncrecv-ms")
	b.ReportMetric(ms(recvNoOps)/perChange, "syncrecv-noops-ms")
	b.ReportMetric(ms(recvBase)/perChange, "recv-base-ms")
	b.ReportMetric(float64(msgStats.LastPatched), "sync-patched")
	b.ReportMetric(float64(msgStats.LastSame), "sync-same")
	b.ReportMetric(float64(msgStats.LastDecoded), "sync-decoded")
	b.ReportMetric(float64(msgStats.LastGroups), "sync-groups")
	b.ReportMetric(float64(alloc)/float64(n*perChange)/1024, "change-alloc-kB")
	b.ReportMetric(float64(syncAlloc)/float64(n)/1024, "syncmsg-alloc-kB")
	b.ReportMetric(ms(walk), "walk-ms")
	b.ReportMetric(float64(full)/float64(ref), "full/nftsave")
	b.ReportMetric(float64(change)/perChange/float64(ref), "change/nftsave")
	b.ReportMetric(float64(sync)/perChange/float64(ref), "sync/nftsave")
	b.ReportMetric(float64(groups), "groups")
	b.ReportMetric(float64(changed), "changed")
	b.ReportMetric(float64(frontends), "frontends")
	if timedOut {
		b.ReportMetric(1, "ref-timed-out")
	}
}

// oneServiceChains names a KUBE-SVC chain and one of its KUBE-SEP chains.
func oneServiceChains(b *testing.B, s bench.Spec) (string, string) {
	for _, v := range s.List() {
		if len(v.Endpoints) > 0 {
			return "KUBE-SVC-" + iptables.ChainHash(v.Port), "KUBE-SEP-" + iptables.EndpointChainHash(v.Port, v.Endpoints[0].String())
		}
	}
	b.Fatal("no service with endpoints")
	return "", ""
}

// nftSaveBoth runs the reference, iptables-nft-save of nat and of filter
// (unless -no-nft-save), and returns its CPU and whether it timed out.
func nftSaveBoth(b *testing.B, ns string) (cpu time.Duration, timedOut bool) {
	b.Helper()
	for _, t := range []string{"nat", "filter"} {
		if *noNFTSave {
			break
		}
		c, err := nftSave(ns, t)
		cpu += c
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				b.Fatal(err)
			}
			timedOut = true
		}
	}
	return cpu, timedOut
}

// nftSave runs iptables-nft-save -t table in the netns and returns its CPU.
func nftSave(ns, table string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nftSaveTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "iptables-nft-save", "-t", table)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if ctx.Err() != nil {
		return max(cpu, nftSaveTimeout/2), context.DeadlineExceeded
	}
	if err != nil {
		return cpu, errors.New(err.Error() + ": " + errb.String())
	}
	return cpu, nil
}

// cpuOf is this process's CPU time spent in fn, garbage collection of what
// fn allocated included (a GC is forced at both ends, as bench.selfCPU does).
func cpuOf(fn func()) time.Duration {
	runtime.GC()
	t0 := rusageSelf()
	fn()
	runtime.GC()
	return rusageSelf() - t0
}

// cpuNoGC is this process's CPU time spent in fn, no GC forced.
func cpuNoGC(fn func()) time.Duration {
	t0 := rusageSelf()
	fn()
	return rusageSelf() - t0
}

func rusageSelf() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
