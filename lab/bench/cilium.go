package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// Cilium mode: the node runs cilium-lb (Cilium's own load-balancer control
// plane, lab/cilium) in kube-proxy's place and the agent reads the maps it
// writes (--datapath=cilium on the node's bpffs). What the harness takes
// from kube-proxy elsewhere comes from Cilium's own tool here: the
// reference read and the synced check are `cilium-dbg bpf lb list` on the
// node's maps.

// ciliumListCmd is the reference read's command line, as printed.
const ciliumListCmd = "cilium-dbg bpf lb list -o json"

// waitSynced waits until the node's service proxy holds every service
// of cl with all its endpoints: kube-proxy by its metrics and its last
// service's rules, cilium-lb by Cilium's own listing of every frontend.
func waitSynced(ctx context.Context, l *labenv.Lab, cfg Config, p *proxyMetrics, cl *Cluster, since time.Time, timeout time.Duration) error {
	if isCilium(cfg.Mode) {
		return waitCiliumSynced(ctx, l, cl, timeout)
	}
	return waitProxySynced(ctx, l, p, cl.ClusterIPs[len(cl.ClusterIPs)-1], cl.EndpointsPerService, since, timeout)
}

// waitCiliumSynced waits until `cilium-dbg bpf lb list --frontends` on
// the node's maps gives every ClusterIP of cl (port 80, TCP) a master
// entry with cl.EndpointsPerService selectable slots. It polls once a
// second: each listing reads every master entry of the maps.
func waitCiliumSynced(ctx context.Context, l *labenv.Lab, cl *Cluster, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		out, err := l.CiliumLBList(node, "--frontends")
		if err == nil {
			var counts map[string]int
			if counts, err = parseFrontendCounts(out); err == nil {
				short, example := shortFrontends(counts, cl.ClusterIPs, 80, cl.EndpointsPerService)
				if short == 0 {
					return nil
				}
				last = fmt.Sprintf("%d of %d services lack their %d backends in the maps (e.g. %s)", short, len(cl.ClusterIPs), cl.EndpointsPerService, example)
			}
		}
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %s", timeout, last)
		}
		sleepCtx(ctx, time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// shortFrontends counts the ClusterIPs whose ip:port master entry does not
// have want selectable slots, and names the first.
func shortFrontends(counts map[string]int, ips []string, port, want int) (int, string) {
	short, example := 0, ""
	for _, ip := range ips {
		fe := ip + ":" + strconv.Itoa(port)
		if c, ok := counts[fe]; !ok || c != want {
			if short == 0 {
				example = fmt.Sprintf("%s: %d", fe, c)
				if !ok {
					example = fe + ": no master entry"
				}
			}
			short++
		}
	}
	return short, example
}

// parseFrontendCounts reads `cilium-dbg bpf lb list --frontends -o json`:
// "ip:port" of each TCP master entry (slot 0) -> its count of selectable
// slots, from the value "backend-id count[qcount] (rev-nat) [flags]".
// A frontend listed twice (external and internal scope) keeps the first
// count read; the benchmark's services have one scope.
func parseFrontendCounts(listing []byte) (map[string]int, error) {
	var m map[string][]string
	if err := json.Unmarshal(listing, &m); err != nil {
		return nil, fmt.Errorf("cilium-dbg --frontends listing: %w", err)
	}
	out := map[string]int{}
	for k, v := range m {
		fe, ok := strings.CutSuffix(k, "/TCP (0)")
		if !ok || len(v) == 0 {
			continue
		}
		f := strings.Fields(v[0])
		if len(f) < 2 {
			return nil, fmt.Errorf("cilium-dbg --frontends entry %q of %s: want \"backend-id count[qcount] ...\"", v[0], k)
		}
		n, _, _ := strings.Cut(f[1], "[")
		c, err := strconv.Atoi(n)
		if err != nil {
			return nil, fmt.Errorf("cilium-dbg --frontends entry %q of %s: %v", v[0], k, err)
		}
		if _, seen := out[fe]; !seen {
			out[fe] = c
		}
	}
	return out, nil
}

// ciliumRefDump is the reference full read in cilium mode: Cilium's own
// `cilium-dbg bpf lb list -o json` of the node's maps (the listing a
// responder takes on a Cilium node), CPU from the rusage of the command,
// which includes its wrapper: unshare, a shell and one `umount -l` per
// other bpf mount of the host (cilium-dbg reads the first one it finds).
func ciliumRefDump(l *labenv.Lab) (RefDump, error) {
	cmd, err := l.CiliumLBListCmd(node)
	if err != nil {
		return RefDump{}, err
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return RefDump{}, fmt.Errorf("%s: %v: %s", ciliumListCmd, err, stderr.String())
	}
	r := RefDump{Cmd: ciliumListCmd, Wall: time.Since(start), Bytes: out.Len(), Out: out.Bytes()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return r, nil
}
