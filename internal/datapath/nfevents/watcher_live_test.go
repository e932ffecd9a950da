package nfevents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/netdrift/netdrift/internal/nsutil"
)

// watchedTable is a kube-proxy-shaped table: a verdict map and the
// service chain one of its elements jumps to.
const watchedTable = `table ip kube-proxy {
	chain service-7OV2ZJV7-ns2/etp-local/tcp/http {
		meta l4proto tcp dnat to 10.1.1.9:80
	}
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.13 . tcp . 80 : goto service-7OV2ZJV7-ns2/etp-local/tcp/http }
	}
}
`

// nftApply runs nft -f with script in ns.
func nftApply(t *testing.T, ns, script string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.nft")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	nftIn(t, ns, "nft", "-f", path)
}

// commitTable commits a new table from this process over netlink and
// returns when the commit began.
func commitTable(t *testing.T, ns, name string) time.Time {
	t.Helper()
	var start time.Time
	err := nsutil.WithFd(ns, func(fd int) error {
		opts := []nftables.ConnOption{}
		if fd != 0 {
			opts = append(opts, nftables.WithNetNSFd(fd))
		}
		conn, err := nftables.New(opts...)
		if err != nil {
			return err
		}
		conn.AddTable(&nftables.Table{Name: name, Family: nftables.TableFamilyIPv4})
		start = time.Now()
		return conn.Flush()
	})
	if err != nil {
		t.Fatal(err)
	}
	return start
}

// TestChangeWatcherLatency asserts a committed change is seen in under 100 ms,
// with the generation, the process and the touched set.
func TestChangeWatcherLatency(t *testing.T) {
	ns := nftTestNetns(t)
	nftApply(t, ns, watchedTable)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := Watch(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	gen0 := w.Generation()
	if g, err := Generation(ns); err != nil || g != gen0 {
		t.Fatalf("Generation = %d, %v; watcher says %d", g, err, gen0)
	}
	// Latency: commit from this process, timing the commit itself (an nft
	// command's start-up would dominate on a loaded machine).
	start := commitTable(t, ns, "nd-latency")
	ev := nftWaitEvent(t, w, func(ev Event) bool { return ev.TouchesTable("ip", "nd-latency") })
	if lag := ev.Received.Sub(start); lag >= 100*time.Millisecond {
		t.Errorf("event seen %v after the commit, want < 100ms", lag)
	}
	// The kernel names the committing thread (its id and the process's comm).
	comm := filepath.Base(os.Args[0])
	if len(comm) > 15 {
		comm = comm[:15]
	}
	if ev.Generation <= gen0 || ev.PID == 0 || ev.Process != comm {
		t.Errorf("generation %d (was %d), committer %q pid %d; want a newer generation by %q", ev.Generation, gen0, ev.Process, ev.PID, comm)
	}
	// A change by the nft tool names the tool, the generation and the set.
	nftIn(t, ns, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.0.13 . tcp . 80 }")
	ev = nftWaitEvent(t, w, func(ev Event) bool { return ev.TouchesTable("ip", "kube-proxy") })
	if w.Generation() != ev.Generation {
		t.Errorf("Generation() %d, last event %d", w.Generation(), ev.Generation)
	}
	if ev.Process != "nft" || ev.PID == 0 {
		t.Errorf("committer %q pid %d, want nft", ev.Process, ev.PID)
	}
	if sets := ev.Sets("ip", "kube-proxy"); len(sets) != 1 || sets[0] != "service-ips" {
		t.Errorf("touched sets %v, want [service-ips]", sets)
	}
	// A chain flush names the chain.
	nftIn(t, ns, "nft", "flush", "chain", "ip", "kube-proxy", "service-7OV2ZJV7-ns2/etp-local/tcp/http")
	ev = nftWaitEvent(t, w, func(ev Event) bool { return ev.TouchesTable("ip", "kube-proxy") })
	if chains := ev.Chains("ip", "kube-proxy"); len(chains) != 1 || chains[0] != "service-7OV2ZJV7-ns2/etp-local/tcp/http" {
		t.Errorf("touched chains %v", chains)
	}
	// The commit log: a view of gen0 trails the three commits since, the
	// first of them dated as its event was; one of the last generation, none.
	if n, first := w.CommittedAfter(gen0); n != 3 || first.After(start.Add(100*time.Millisecond)) || first.Before(start.Add(-time.Second)) {
		t.Errorf("CommittedAfter(%d) = %d since %v; want 3 since the first commit (%v)", gen0, n, first, start)
	}
	if n, _ := w.CommittedAfter(ev.Generation); n != 0 {
		t.Errorf("CommittedAfter(last generation) = %d", n)
	}
	cancel()
	select {
	case _, ok := <-w.Events():
		for ok {
			_, ok = <-w.Events()
		}
	case <-time.After(2 * time.Second):
		t.Error("events channel not closed after cancel")
	}
}

// TestChangeWatcherOverrun: when the kernel drops notifications (tiny
// socket buffer, large transaction), the watcher says so at once with the
// current generation.
func TestChangeWatcherOverrun(t *testing.T) {
	ns := nftTestNetns(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The reader waits until the commit is over: a reader woken at every
	// datagram sometimes kept pace with even a large transaction
	// (CI, on a loaded 2-core machine), so the kernel dropped nothing.
	hold := make(chan struct{})
	w, err := WatchWith(ctx, ns, Options{ReadBuffer: 1, holdReads: hold})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	nftApply(t, ns, bigTransaction(1000, 10))
	close(hold)
	ev := nftWaitEvent(t, w, func(ev Event) bool { return ev.Lost })
	g, err := Generation(ns)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Generation != g || w.Generation() != g {
		t.Errorf("lost event generation %d, watcher %d, kernel %d", ev.Generation, w.Generation(), g)
	}
	if w.Overruns() == 0 {
		t.Error("the overrun was not counted")
	}
}

// bigTransaction is one transaction of chains chains of rules rules each:
// thousands of notifications, far more than a tiny socket buffer holds.
func bigTransaction(chains, rules int) string {
	var b strings.Builder
	b.WriteString("table ip nd-big {\n")
	for c := range chains {
		fmt.Fprintf(&b, "\tchain c%d {\n", c)
		for r := range rules {
			fmt.Fprintf(&b, "\t\tip daddr 10.%d.%d.%d counter\n", c/250, c%250, r)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}
