//go:build linux

package iptables

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// BenchmarkNFTPollDuringCommit: the wall time of a poll (the generation
// query a Snapshot starts with) while iptables-nft-restore commits large
// batches in a loop, for the reader's kept socket next to a socket opened
// and closed per poll (what the kept socket avoids: closing a
// NETLINK_NETFILTER socket takes the nf_tables commit mutex, which a batch
// holds while the kernel processes it). Each iteration polls both ways, so
// both see the same commits. The reader gets no change events and never
// reads everything (BehindLimit): a poll is its generation query, as in
// the agent between two events. Reported: the worst and the 99th-percentile
// poll of each, in ms, and the restores that ran.
//
//	go test -run '^$' -bench NFTPollDuringCommit -benchtime 400x ./internal/datapath/iptables
func BenchmarkNFTPollDuringCommit(b *testing.B) {
	requireNFT(b, false)
	ns := newTestNetns(b)
	if err := restoreInto(ns, BackendNFT, false, []byte("*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n")); err != nil {
		b.Fatal(err)
	}
	stop := commitLoop(b, ns, bigBatch(50000))
	// No change events are applied here: a reader behind the kernel's
	// generation would read everything after BehindLimit. In the agent,
	// events keep it current, and a poll is the generation query alone.
	r := &NFTReader{NetNS: ns, BehindLimit: time.Hour, AuditEvery: -1}
	defer r.Close()
	ctx := context.Background()
	if _, err := r.Snapshot(ctx, model.Hints{}); err != nil {
		b.Fatal(err)
	}
	var kept, perPoll []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := r.Snapshot(ctx, model.Hints{}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := pollOnNewSocket(ns); err != nil {
			b.Fatal(err)
		}
		kept, perPoll = append(kept, t1.Sub(t0)), append(perPoll, time.Since(t1))
		time.Sleep(5 * time.Millisecond)
	}
	n := stop()
	if n == 0 {
		b.Fatal("no restore completed during the polls: nothing was measured")
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)-1])/1e6, name+"-max-ms")
		b.ReportMetric(float64(d[len(d)*99/100])/1e6, name+"-p99-ms")
	}
	report("kept", kept)
	report("perpoll", perPoll)
	b.ReportMetric(float64(n), "restores")
}

// pollOnNewSocket opens a socket, asks the generation and closes it.
func pollOnNewSocket(ns string) error {
	c, err := dialNFT(ns)
	if err != nil {
		return err
	}
	_, err = getGen(c)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return err
}

// bigBatch is an iptables-nft-restore input that writes one nat chain of
// n rules (declaring the chain flushes it: each restore replaces them).
func bigBatch(n int) string {
	var b strings.Builder
	b.WriteString("*nat\n:KUBE-NDBENCH - [0:0]\n")
	for i := range n {
		fmt.Fprintf(&b, "-A KUBE-NDBENCH -d 10.%d.%d.%d/32 -p tcp -m tcp --dport 80 -j RETURN\n", 1+i/65536, (i/256)%256, i%256)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// commitLoop runs iptables-nft-restore --noflush with input in ns until
// stop is called; stop waits for the running restore and returns how many
// completed (the same count on later calls).
func commitLoop(tb testing.TB, ns, input string) (stop func() int) {
	done, finished := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				finished <- n
				return
			default:
			}
			cmd := exec.Command("ip", "netns", "exec", ns, "iptables-nft-restore", "--noflush")
			cmd.Stdin = strings.NewReader(input)
			if out, err := cmd.CombinedOutput(); err != nil {
				tb.Errorf("iptables-nft-restore: %v: %s", err, out)
				finished <- n
				<-done
				return
			}
			n++
		}
	}()
	stop = sync.OnceValue(func() int {
		close(done)
		return <-finished
	})
	tb.Cleanup(func() { stop() })
	return stop
}
