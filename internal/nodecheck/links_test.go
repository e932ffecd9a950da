package nodecheck

import (
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func deletePod(in Inputs, name string) Inputs {
	var keep []model.PodInfo
	for _, p := range in.Pods {
		if p.Name != name {
			keep = append(keep, p)
		}
	}
	in.Pods = keep
	return in
}

func TestOrphanLink(t *testing.T) {
	cases := []struct {
		name   string
		layout func() (Inputs, Config)
		pod    string
		want   []string
	}{
		// bridge CNI: the veth's peer (resolved by the fetcher) still holds the pod IP.
		{"bridge peer address", hostGW, "cart-1", []string{"orphan_link veth1 (10.244.0.5)"}},
		// Calico: the /32 route onto the cali veth names the pod IP.
		{"calico host route", calicoIPIP, "web-1", []string{"orphan_link cali2222 (10.244.64.2)"}},
		// per-pod /32 routes with a blackhole for the rest of the podCIDR.
		{"native host route", nativeBlackhole, "web-1", []string{"orphan_link veth2 (10.244.0.6)"}},
		// IPv6: the peer's global address counts, its link-local one does not.
		{"dual-stack", dualStack, "cart-1", []string{"orphan_link veth1 (10.244.0.5, fd00:10:244::5)"}},
		// Cilium lxc veths carry no route; without the peer's addresses nothing can be said.
		{"cilium unknown", ciliumTunnel, "cart-1", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, cfg := c.layout()
			fs, info := Check(deletePod(in, c.pod), cfg, now)
			wantFindings(t, fs, c.want...)
			if c.want == nil && info.LinksUnattributed == 0 {
				t.Errorf("expected unattributed links, info %+v", info)
			}
		})
	}
}

func TestOrphanLinkNamesDeletedPod(t *testing.T) {
	in, cfg := hostGW()
	in.Pods[0].Deleted = true
	fs, _ := Check(in, cfg, now)
	wantFindings(t, fs, "orphan_link veth1 (10.244.0.5)")
	if !strings.Contains(fs[0].Detail, "deleted pod shop/cart-1") {
		t.Errorf("detail %q", fs[0].Detail)
	}
}

func TestOrphanLinkNotForLivePods(t *testing.T) {
	in, cfg := hostGW()
	// a terminating pod still owns its interface
	in.Pods[0].Terminating = true
	// a pod of another node with the same address does not count as local
	in.Pods = append(in.Pods, pod("x", "elsewhere", "b", "10.244.0.99"))
	// the docker0 veth leads outside the pod network: not ours to judge
	in.Snapshot.Links = append(in.Snapshot.Links, veth("vethdock", 7, "172.17.0.2"))
	// a multi-address pod matched by one address only
	in.Snapshot.Links = append(in.Snapshot.Links, veth("veth3", 8, "10.244.0.7", "10.244.0.8"))
	in.Pods = append(in.Pods, pod("x", "multi", "a", "10.244.0.8"))
	fs, info := Check(in, cfg, now)
	wantFindings(t, fs)
	if info.LinksUnattributed != 1 {
		t.Errorf("unattributed %d, want 1 (vethdock)", info.LinksUnattributed)
	}
	// but a pod of another node does not keep a local interface alive
	in.Snapshot.Links = append(in.Snapshot.Links, veth("veth4", 9, "10.244.0.99"))
	fs, _ = Check(in, cfg, now)
	wantFindings(t, fs, "orphan_link veth4 (10.244.0.99)")
}

func TestLinkDown(t *testing.T) {
	in, cfg := calicoIPIP()
	in.Snapshot.Links[4].OperState = "lowerlayerdown"
	fs, _ := Check(in, cfg, now)
	wantFindings(t, fs, "link_down cali2222")
	if !strings.Contains(fs[0].Detail, "10.244.64.2/32") || !strings.Contains(fs[0].Detail, "lowerlayerdown") {
		t.Errorf("detail %q", fs[0].Detail)
	}

	// a tunnel device that carries remote pod routes
	in, cfg = flannelVXLAN()
	in.Snapshot.Links[len(in.Snapshot.Links)-1].OperState = "down"
	fs, _ = Check(in, cfg, now)
	wantFindings(t, fs, "link_down flannel.1")

	// the kernel's linkdown flag on a route counts too
	in, cfg = hostGW()
	for i := range in.Snapshot.Routes {
		if in.Snapshot.Routes[i].Dev == "cni0" {
			in.Snapshot.Routes[i].LinkDown = true
		}
	}
	fs, _ = Check(in, cfg, now)
	wantFindings(t, fs, "link_down cni0")

	// a down link without pod routes is none of our business; vxlan "unknown" is up
	in, cfg = flannelVXLAN()
	in.Snapshot.Links = append(in.Snapshot.Links, link("eth1", "device"))
	in.Snapshot.Links[len(in.Snapshot.Links)-1].AdminUp = false
	fs, _ = Check(in, cfg, now)
	wantFindings(t, fs)
}

func TestIPVSStaleFrontend(t *testing.T) {
	in, cfg := hostGW()
	in.Snapshot.Links = append(in.Snapshot.Links,
		link("kube-ipvs0", "dummy", "10.96.0.1/32", "10.96.0.10/32", "10.96.7.7/32", "fd00:96::7/128"))
	in.Snapshot.Links[len(in.Snapshot.Links)-1].OperState = "down" // kube-ipvs0 is never up
	in.Snapshot.Links[len(in.Snapshot.Links)-1].AdminUp = false
	fs, info := Check(in, cfg, now)
	wantFindings(t, fs)
	if !strings.Contains(strings.Join(info.Skipped, ";"), "stale_frontend on kube-ipvs0: service IPs unknown") {
		t.Errorf("skipped %q", info.Skipped)
	}
	in.ServicesKnown = true
	in.ServiceIPs = addrs("10.96.0.1", "10.96.0.10")
	fs, _ = Check(in, cfg, now)
	wantFindings(t, fs, "stale_frontend kube-ipvs0 10.96.7.7", "stale_frontend kube-ipvs0 fd00:96::7")
	cfg.IPVSDevice = "other0"
	fs, _ = Check(in, cfg, now)
	wantFindings(t, fs)
}

func TestOrphanLinkNeedsClusterState(t *testing.T) {
	in, cfg := hostGW()
	in.Nodes, in.Pods = nil, nil // nothing synced yet: every veth would look orphaned
	fs, info := Check(in, cfg, now)
	wantFindings(t, fs)
	if !strings.Contains(strings.Join(info.Skipped, ";"), "orphan_link: no Node objects known") {
		t.Errorf("skipped %q", info.Skipped)
	}
}
