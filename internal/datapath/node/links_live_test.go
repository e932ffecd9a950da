package node

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nodecheck"
)

// holdNetns starts a process inside ns (a leaked pod sandbox keeps its
// namespace alive like this) and kills it, by PID, at cleanup.
func holdNetns(t *testing.T, ns string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleeper in %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	pid := strconv.Itoa(cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out, _ := exec.Command("ip", "netns", "identify", pid).Output()
		if strings.TrimSpace(string(out)) == ns {
			return cmd
		}
	}
	t.Fatalf("process %s never entered %s", pid, ns)
	return nil
}

func hasLink(s *model.NodeSnapshot, name string) bool {
	for _, l := range s.Links {
		if l.Name == name {
			return true
		}
	}
	return false
}

// onePodNode builds node a with pods web-1 (10.77.0.5 on vpa1) and web-2
// (10.77.0.6 on vpa2), /32 routes per pod and a blackhole for the podCIDR.
func onePodNode(t *testing.T) (l *nodeLab, a, pa1, pa2 string, in nodecheck.Inputs) {
	l = newNodeLab(t)
	lan := l.netns("lan")
	l.ip(lan, "link", "add", "br0", "type", "bridge")
	l.ip(lan, "link", "set", "br0", "up")
	a, pa1, pa2 = l.netns("a"), l.netns("pa1"), l.netns("pa2")
	l.lanNode(lan, a, "pa", "192.168.77.10")
	l.ip(a, "route", "add", "blackhole", "10.77.0.0/24")
	l.pod(a, pa1, "vpa1", "10.77.0.5", "10.77.0.1")
	l.pod(a, pa2, "vpa2", "10.77.0.6", "10.77.0.1")
	in = nodecheck.Inputs{NodeName: "a",
		Nodes: []model.NodeInfo{liveNode("a", "10.77.0.0/24", "192.168.77.10")},
		Pods:  []model.PodInfo{livePod("web-1", "a", "10.77.0.5"), livePod("web-2", "a", "10.77.0.6")}}
	return l, a, pa1, pa2, in
}

func TestNodeStateLiveOrphanLink(t *testing.T) {
	_, a, _, pa2, in := onePodNode(t)
	check := func() ([]model.Finding, nodecheck.Info) {
		in.Snapshot = liveSnapshot(t, a)
		return nodecheck.Check(in, nodecheck.Config{}, time.Now())
	}
	fs, info := check()
	wantLive(t, fs) // healthy
	// eth0 is a veth too (to the lan), whose peer holds no pod address
	if info.LinksUnattributed != 1 || info.LinksChecked != 4 {
		t.Errorf("info %+v", info)
	}

	// pod web-2 is deleted from the API, but its sandbox namespace leaked
	// (still mounted): its veth and /32 route are left behind
	in.Pods = in.Pods[:1]
	fs, _ = check()
	wantLive(t, fs, "orphan_link vpa2 (10.77.0.6)")
	if ev := strings.Join(fs[0].Evidence, "; "); !strings.Contains(ev, "host route 10.77.0.6/32 dev vpa2") ||
		!strings.Contains(ev, "holds 10.77.0.6") {
		t.Errorf("evidence %q", ev)
	}

	// without peer resolution the /32 route alone tells
	s, err := ReadWith(context.Background(), Config{Netns: a, SkipPeers: true, SkipConntrack: true})
	if err != nil {
		t.Fatal(err)
	}
	in.Snapshot = &s
	fs, _ = nodecheck.Check(in, nodecheck.Config{}, time.Now())
	wantLive(t, fs, "orphan_link vpa2 (10.77.0.6)")

	// the namespace's name is removed while a process still lives in it:
	// the peer is found through /proc
	sleeper := holdNetns(t, pa2)
	if out, err := exec.Command("ip", "netns", "del", pa2).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v %s", err, out)
	}
	fs, _ = check()
	wantLive(t, fs, "orphan_link vpa2 (10.77.0.6)")
	if !liveLink(t, in.Snapshot, "vpa2").PeerResolved {
		t.Error("peer of vpa2 not resolved through /proc")
	}

	// the last holder exits: the kernel destroys the namespace, the veth
	// pair and the route with it, so nothing is left to report
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		in.Snapshot = liveSnapshot(t, a)
		if !hasLink(in.Snapshot, "vpa2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("vpa2 still exists 10s after its namespace died")
		}
	}
	fs, _ = nodecheck.Check(in, nodecheck.Config{}, time.Now())
	wantLive(t, fs)
}

func TestNodeStateLiveLinkDown(t *testing.T) {
	l, a, pa1, _, in := onePodNode(t)
	// the pod side goes down: the host side loses carrier, the route stays
	l.ip(pa1, "link", "set", "eth0", "down")
	// the kernel propagates carrier changes asynchronously (linkwatch)
	var fs []model.Finding
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		in.Snapshot = liveSnapshot(t, a)
		if fs, _ = nodecheck.Check(in, nodecheck.Config{}, time.Now()); len(fs) > 0 || time.Now().After(deadline) {
			break
		}
	}
	wantLive(t, fs, "link_down vpa1")
	if !strings.Contains(fs[0].Detail, "10.77.0.5/32") {
		t.Errorf("detail %q", fs[0].Detail)
	}
	l.ip(pa1, "link", "set", "eth0", "up")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		in.Snapshot = liveSnapshot(t, a)
		if fs, _ = nodecheck.Check(in, nodecheck.Config{}, time.Now()); len(fs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			wantLive(t, fs)
		}
	}
}
