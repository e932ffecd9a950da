//go:build linux

package iptables_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/bench"
	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/netnstest"
	"github.com/netdrift/netdrift/internal/watch"
)

// BenchmarkNFTReader: iptables-nft-save -t nat + -t filter (the reference:
// what the iptables-save path forks on every read) vs the in-process
// netlink reader on the same table in the same iteration: a full read
// (fresh reader: chains + every rule, decoded), a change-event update
// re-reading one service chain and one endpoint chain, and the walk of the
// cached tables into model.Observed (whole-table work the update does not
// remove). CPU time per op from rusage; ratios are netlink / reference.
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
	changes := []iptables.NFTChange{{Family: "ip", Table: "nat", Object: "rule", Name: svc}, {Family: "ip", Table: "nat", Object: "rule", Name: sep}}
	var ref, full, update, walk time.Duration
	timedOut := false
	n := 0
	for b.Loop() {
		for _, t := range []string{"nat", "filter"} {
			cpu, err := nftSave(ns, t)
			ref += cpu
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) {
					b.Fatal(err)
				}
				timedOut = true
			}
		}
		nr := &iptables.NFTReader{NetNS: ns}
		var obs model.Observed
		var err error
		full += cpuOf(func() { obs, err = nr.Snapshot(context.Background(), hints) })
		if err != nil || len(obs.Frontends) < s.Services {
			b.Fatalf("full read: %v, %d frontends", err, len(obs.Frontends))
		}
		update += cpuOf(func() { err = nr.ApplyChanges(context.Background(), 0, false, changes) })
		if err != nil || nr.Stats().LastChains != 2 {
			b.Fatalf("update: %v, %d chains", err, nr.Stats().LastChains)
		}
		walk += cpuOf(func() { obs, err = nr.Snapshot(context.Background(), hints) })
		if err != nil || nr.Stats().FullReads != 1 {
			b.Fatalf("walk: %v, %d full reads", err, nr.Stats().FullReads)
		}
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	b.ReportMetric(ms(ref), "nftsave-ms")
	b.ReportMetric(ms(full), "full-ms")
	b.ReportMetric(ms(update), "update-ms")
	b.ReportMetric(ms(walk), "walk-ms")
	b.ReportMetric(float64(full)/float64(ref), "full/nftsave")
	b.ReportMetric(float64(update)/float64(ref), "update/nftsave")
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

func rusageSelf() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
