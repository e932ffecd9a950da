//go:build linux

package iptables_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// BenchmarkLegacyReader: iptables-legacy-save -t nat + -t filter (the
// reference: what the iptables-save path forks on every read, under
// `ip netns exec` as the reader runs it) vs the in-process reader on the
// same table in the same iteration: a full read (fresh reader: GET_INFO +
// GET_ENTRIES of both tables, decode, render, parse, walk: what any change
// costs) and an unchanged read (the same reader again: both tables copied
// and compared with the last read's bytes, nothing decoded or walked).
// CPU time per op from rusage (the kernel's copy is this process's system
// time); ratios are in-process / reference. Each measured window forces a GC
// at both ends and so also pays one mark of the live heap (the reader's
// cached tables): gc-floor-ms is that cost alone (an empty window).
func BenchmarkLegacyReader(b *testing.B) {
	for _, sc := range []struct {
		name string
		spec bench.Spec
	}{{"10k", bench.Scale10k}, {"100k", bench.Scale100k}} {
		b.Run(sc.name, func(b *testing.B) { benchLegacyReader(b, sc.spec) })
	}
}

func benchLegacyReader(b *testing.B, s bench.Spec) {
	netnstest.RequireRoot(b, "loads generated tables into a fresh network namespace")
	for _, tool := range []string{"iptables-legacy-restore", "iptables-legacy-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not installed", tool)
		}
	}
	ns := netnstest.New(b, "nd-lgbench")
	restore := netnstest.Cmd(ns, "iptables-legacy-restore")
	restore.Stdin = strings.NewReader(s.IPTablesRestore())
	if out, err := restore.CombinedOutput(); err != nil {
		b.Skipf("iptables-legacy-restore (kernel lacks ip_tables?): %v: %s", err, out)
	}
	hints := model.HintsFor(watch.Expected(bench.NodeName, s.ClusterState()))
	var ref, full, unchanged, exec0, floor time.Duration
	var bytesRead, textBytes int
	n := 0
	for b.Loop() {
		var text []byte
		for _, t := range []string{"nat", "filter"} {
			out, cpu := legacySave(b, ns, t)
			ref += cpu
			text = append(text, out...)
		}
		textBytes = len(text)
		exec0 += legacyExecFloor(b, ns)
		lr := &iptables.LegacyReader{NetNS: ns}
		var obs model.Observed
		var fresh bool
		var err error
		full += cpuOf(func() { obs, fresh, _, err = lr.Snapshot(context.Background(), hints, 1) })
		if err != nil || !fresh || len(obs.Frontends) < s.Services {
			b.Fatalf("full read: %v, fresh %v, %d frontends", err, fresh, len(obs.Frontends))
		}
		want, err := iptables.Parse(iptables.Dumps{IPv4: text}, hints)
		if err != nil || len(want.Frontends) != len(obs.Frontends) || len(want.Warnings) != len(obs.Warnings) {
			b.Fatalf("in-process read differs from the dump's parse: %v, %d/%d frontends", err, len(obs.Frontends), len(want.Frontends))
		}
		// The first unchanged read allocates the second buffer; measure the
		// steady state (every later one reuses it).
		_, _, _, _ = lr.Snapshot(context.Background(), hints, 1)
		unchanged += cpuOf(func() { obs, fresh, _, err = lr.Snapshot(context.Background(), hints, 1) })
		if err != nil || fresh || lr.Stats().Decodes != 2 {
			b.Fatalf("unchanged read: %v, fresh %v, %+v", err, fresh, lr.Stats())
		}
		floor += cpuOf(func() {})
		runtime.KeepAlive(lr)
		bytesRead = lr.Stats().Bytes
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	b.ReportMetric(ms(ref), "legacysave-ms")
	b.ReportMetric(ms(exec0), "netns-exec-ms")
	b.ReportMetric(ms(full), "full-ms")
	b.ReportMetric(ms(unchanged), "unchanged-ms")
	b.ReportMetric(ms(floor), "gc-floor-ms")
	b.ReportMetric(float64(full)/float64(ref), "full/save")
	b.ReportMetric(float64(unchanged)/float64(ref), "unchanged/save")
	b.ReportMetric(float64(bytesRead)/1e6, "blob-MB")
	b.ReportMetric(float64(textBytes)/1e6, "text-MB")
}

// legacySave runs iptables-legacy-save -t table in the netns; its CPU.
func legacySave(b *testing.B, ns, table string) ([]byte, time.Duration) {
	cmd := exec.Command("ip", "netns", "exec", ns, "iptables-legacy-save", "-t", table)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		b.Fatalf("iptables-legacy-save: %v: %s", err, errb.String())
	}
	return out.Bytes(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// legacyExecFloor is the CPU of `ip netns exec NS true` (the wrapper alone).
func legacyExecFloor(b *testing.B, ns string) time.Duration {
	cmd := exec.Command("ip", "netns", "exec", ns, "true")
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// BenchmarkLegacyReaderChanged: the read of a table that changed while the
// reader holds the previous one (what every poll under churn costs): a
// chain added with iptables-legacy-restore --noflush before each measured
// Snapshot. changed-ms is CPU from rusage; peak-heap-MiB the largest heap
// (live and garbage not yet collected) over the live heap before it, at the
// GOGC the test runs with; live-heap-MiB what the reader keeps after it.
func BenchmarkLegacyReaderChanged(b *testing.B) {
	for _, sc := range []struct {
		name string
		spec bench.Spec
	}{{"10k", bench.Scale10k}, {"100k", bench.Scale100k}} {
		b.Run(sc.name, func(b *testing.B) { benchLegacyChanged(b, sc.spec) })
	}
}

func benchLegacyChanged(b *testing.B, s bench.Spec) {
	netnstest.RequireRoot(b, "loads generated tables into a fresh network namespace")
	if _, err := exec.LookPath("iptables-legacy-restore"); err != nil {
		b.Skip("iptables-legacy-restore not installed")
	}
	ns := netnstest.New(b, "nd-lgchg")
	restore := netnstest.Cmd(ns, "iptables-legacy-restore")
	restore.Stdin = strings.NewReader(s.IPTablesRestore())
	if out, err := restore.CombinedOutput(); err != nil {
		b.Skipf("iptables-legacy-restore (kernel lacks ip_tables?): %v: %s", err, out)
	}
	hints := model.HintsFor(watch.Expected(bench.NodeName, s.ClusterState()))
	lr := &iptables.LegacyReader{NetNS: ns}
	if _, _, _, err := lr.Snapshot(context.Background(), hints, 1); err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	var peak, live float64
	n := 0
	for b.Loop() {
		add := netnstest.Cmd(ns, "iptables-legacy-restore", "--noflush")
		add.Stdin = strings.NewReader(fmt.Sprintf("*nat\n:ND-BENCH-%d - [0:0]\nCOMMIT\n", n))
		if out, err := add.CombinedOutput(); err != nil {
			b.Fatalf("restore: %v: %s", err, out)
		}
		runtime.GC()
		base := heapObjects()
		var fresh bool
		var err error
		p := peakHeapOf(func() { cpu += cpuOf(func() { _, fresh, _, err = lr.Snapshot(context.Background(), hints, 1) }) })
		if err != nil || !fresh {
			b.Fatalf("changed read: %v, fresh %v", err, fresh)
		}
		runtime.GC()
		peak, live = max(peak, p), max(live, mibOver(heapObjects(), base)+mibOver(base, 0))
		n++
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "changed-ms")
	b.ReportMetric(peak, "peak-heap-MiB")
	b.ReportMetric(live, "live-heap-MiB")
	b.ReportMetric(0, "ns/op")
}
