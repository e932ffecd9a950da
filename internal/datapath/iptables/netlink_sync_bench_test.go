//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nfevents"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// kubeProxySync is the restore input of one kube-proxy iptables sync in
// which one endpoint moved: the chains it rewrites on every sync (nat
// KUBE-SERVICES and KUBE-NODEPORTS, the filter chains) declared (flushed)
// and written whole, and the endpoint's KUBE-SEP chain.
func kubeProxySync(s bench.Spec, sep string, backend int) string {
	every := map[string]bool{"KUBE-SERVICES": true, "KUBE-NODEPORTS": true, "KUBE-EXTERNAL-SERVICES": true,
		"KUBE-FORWARD": true, "KUBE-PROXY-FIREWALL": true}
	var b strings.Builder
	for _, l := range strings.Split(s.IPTablesRestore(), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
		case l[0] == '*' || l == "COMMIT":
			b.WriteString(l + "\n")
		case l[0] == ':':
			if name := f[0][1:]; every[name] || name == sep {
				b.WriteString(l + "\n")
			}
		case f[0] == "-A" && every[f[1]]:
			b.WriteString(l + "\n")
		case f[0] == "-A" && f[1] == sep && strings.Contains(l, "DNAT"):
			fmt.Fprintf(&b, "-A %s -p tcp -m tcp -j DNAT --to-destination 10.254.%d.%d:8080\n", sep, backend/250%250, backend%250)
		case f[0] == "-A" && f[1] == sep:
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// syncMsgs measures perChange kube-proxy syncs delivered as they are live:
// the watcher carries the rule messages, ApplyEvent patches the chains,
// Snapshot returns the state, and each event's memory goes back to the
// watcher (as the agent does). A first sync, not counted, fills that
// memory. recv: this process's CPU from the restore's start to the last
// event's receipt (the watcher, and the test's fork and wait of the
// restore); apply: ApplyEvent + Snapshot; alloc: bytes allocated per sync
// (the restore inputs are made before).
func syncMsgs(b *testing.B, ns string, s bench.Spec, nr *iptables.NFTReader, hints model.Hints, sep string, backend *int) (recv, apply time.Duration, st iptables.NFTStats, alloc uint64) {
	w := syncWatcher(b, ns, true)
	defer w.Close()
	inputs := make([]string, perChange+1) // made first: the allocation figure is the agent's side only
	for i := range inputs {
		*backend++
		inputs[i] = kubeProxySync(s, sep, *backend)
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	for i, in := range inputs {
		if i == 1 { // the first sync fills the watcher's op memory: not counted
			runtime.ReadMemStats(&m0)
		}
		evs, cpu := restoreEvents(b, ns, w, in)
		var err error
		var sum iptables.NFTStats
		took := cpuNoGC(func() {
			for _, ev := range evs {
				err = nr.ApplyEvent(context.Background(), ev)
				ev.Release() // as the iptables mode does (Mode.ApplyChange)
				if err != nil {
					return
				}
				x := nr.Stats()
				sum.LastChains += x.LastChains
				sum.LastPatched += x.LastPatched
				sum.LastSame += x.LastSame
				sum.LastDecoded += x.LastDecoded
				sum.LastGroups += x.LastGroups
				sum.LastChanged += x.LastChanged
			}
			if err == nil {
				_, err = nr.Snapshot(context.Background(), hints)
			}
		})
		if err != nil || sum.LastChanged == 0 || sum.LastChains != 0 || !evs[len(evs)-1].OpsComplete {
			b.Fatalf("sync with messages: %v, stats %+v", err, sum)
		}
		st = sum
		if i > 0 { // the first one, as above, fills the op memory
			recv, apply = recv+cpu, apply+took
		}
	}
	runtime.ReadMemStats(&m1)
	apply += cpuOf(func() {}) // the GC of what the syncs allocated, amortized
	return recv, apply, st, (m1.TotalAlloc - m0.TotalAlloc) / perChange
}

// recvCosts is the receive side of the same syncs without the rule messages
// carried (noOps: the watcher as it was), and of a restore that changes one
// rule (base: mostly the fork and wait, to subtract).
func recvCosts(b *testing.B, ns string, s bench.Spec, sep string, backend *int) (noOps, base time.Duration) {
	w := syncWatcher(b, ns, false)
	defer w.Close()
	for range perChange {
		*backend++
		_, cpu := restoreEvents(b, ns, w, kubeProxySync(s, sep, *backend))
		noOps += cpu
		*backend++
		_, cpu = restoreEvents(b, ns, w, fmt.Sprintf("*nat\n:%s - [0:0]\n-A %s -p tcp -m tcp -j DNAT --to-destination 10.253.%d.%d:8080\nCOMMIT\n",
			sep, sep, *backend/250%250, *backend%250))
		base += cpu
	}
	return noOps, base
}

func syncWatcher(b *testing.B, ns string, ops bool) *nfevents.Watcher {
	opts := nfevents.Options{}
	if ops {
		opts.OpTables = []nfevents.TableRef{{Family: "ip", Table: "nat"}, {Family: "ip", Table: "filter"}}
	}
	w, err := nfevents.WatchWith(context.Background(), ns, opts)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// restoreEvents runs iptables-nft-restore --noflush and returns the events
// up to the generation it left, and this process's CPU meanwhile.
func restoreEvents(b *testing.B, ns string, w *nfevents.Watcher, in string) ([]nfevents.Event, time.Duration) {
	t0 := rusageSelf()
	netnstest.RunInput(b, ns, in, "iptables-nft-restore", "--noflush")
	gen, err := nfevents.Generation(ns)
	if err != nil {
		b.Fatal(err)
	}
	var evs []nfevents.Event
	for len(evs) == 0 || int32(evs[len(evs)-1].Generation-gen) < 0 {
		evs = append(evs, <-w.Events())
	}
	return evs, rusageSelf() - t0
}
