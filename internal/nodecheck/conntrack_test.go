package nodecheck

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func sp(ns, name, port string, p model.Protocol) model.ServicePort {
	return model.ServicePort{ServiceName: model.ServiceName{Namespace: ns, Name: name}, Port: port, Protocol: p}
}

func forward(svc model.ServicePort, backends []string, notReady ...string) model.Verdict {
	v := model.Verdict{Service: svc, Action: model.Forward}
	for _, b := range backends {
		v.Backends = append(v.Backends, ap(b))
		v.Endpoints = append(v.Endpoints, model.Endpoint{Addr: ap(b), Ready: true, Serving: true, Included: true, Reason: "ready"})
	}
	for _, b := range notReady {
		v.Endpoints = append(v.Endpoints, model.Endpoint{Addr: ap(b), Reason: "not ready"})
	}
	v.Backends = model.SortBackends(v.Backends)
	return v
}

func clusterIP(ip string, port uint16, p model.Protocol) model.Frontend {
	return model.NewFrontend(addr(ip), port, p, model.ClusterIP)
}

func testDesired() map[model.Frontend]model.Verdict {
	dns := sp("kube-system", "kube-dns", "dns", model.UDP)
	dnsTCP := sp("kube-system", "kube-dns", "dns-tcp", model.TCP)
	web := sp("shop", "web", "http", model.TCP)
	uncertain := forward(sp("shop", "odd", "http", model.TCP), nil)
	uncertain.Uncertain = "topology hints"
	return map[model.Frontend]model.Verdict{
		clusterIP("10.96.0.10", 53, model.UDP):          forward(dns, []string{"10.244.1.5:53", "10.244.2.6:53"}, "10.244.1.9:53"),
		clusterIP("fd00:96::10", 53, model.UDP):         forward(dns, []string{"[fd00:10:244:1::5]:53"}),
		clusterIP("10.96.0.10", 53, model.TCP):          forward(dnsTCP, []string{"10.244.1.5:53", "10.244.2.6:53"}),
		clusterIP("10.96.5.5", 80, model.TCP):           forward(web, []string{"10.244.1.20:8080"}),
		model.NewNodePort(30080, model.TCP, model.IPv4): forward(web, []string{"10.244.1.20:8080"}),
		clusterIP("10.96.9.9", 80, model.TCP):           {Service: sp("shop", "payments", "http", model.TCP), Action: model.Reject},
		clusterIP("10.96.8.8", 80, model.TCP):           uncertain,
	}
}

func flow(p model.Protocol, src, dst, replySrc string) model.Flow {
	f := model.Flow{Protocol: p, Orig: model.Tuple{Src: ap(src), Dst: ap(dst)}, Reply: model.Tuple{Src: ap(replySrc), Dst: ap(src)}}
	if p == model.TCP {
		f.TCPState = "ESTABLISHED"
	}
	return f
}

func testFlows() []model.Flow {
	tw := flow(model.TCP, "10.244.0.5:40006", "10.96.0.10:53", "10.244.3.3:53")
	tw.TCPState = "TIME_WAIT"
	dying := flow(model.UDP, "10.244.0.5:40013", "10.96.0.10:53", "10.244.3.3:53")
	dying.Dying = true
	return []model.Flow{
		flow(model.UDP, "10.244.0.5:40001", "10.96.0.10:53", "10.244.1.5:53"), // valid backend
		flow(model.UDP, "10.244.0.5:40002", "10.96.0.10:53", "10.244.3.3:53"), // stale
		flow(model.UDP, "10.244.0.6:40003", "10.96.0.10:53", "10.244.3.3:53"), // stale, same backend
		flow(model.UDP, "10.244.0.5:40004", "10.96.0.10:53", "10.244.3.4:53"), // stale, other backend
		flow(model.TCP, "10.244.0.5:40005", "10.96.0.10:53", "10.244.3.3:53"), // stale TCP
		tw, // closing: ignored
		flow(model.UDP, "10.244.0.5:40007", "10.96.0.10:53", "10.244.1.9:53"),         // not ready, pod exists
		flow(model.TCP, "203.0.113.9:50000", "192.168.1.10:30080", "10.244.7.7:8080"), // node port, stale
		flow(model.TCP, "203.0.113.9:50001", "192.168.9.9:30080", "10.244.7.7:8080"),  // not a local address
		flow(model.TCP, "10.244.0.5:40010", "10.96.9.9:80", "10.244.1.1:80"),          // service has no endpoints now
		flow(model.TCP, "10.244.0.5:40011", "10.96.8.8:80", "10.244.6.6:80"),          // uncertain: never stale
		flow(model.TCP, "10.244.0.5:40012", "10.96.5.5:80", "10.96.5.5:80"),           // not DNATed
		dying, // being destroyed
		flow(model.TCP, "10.244.0.5:40014", "10.244.1.20:8080", "10.244.1.20:8080"),            // pod to pod
		flow(model.UDP, "[fd00:10:244::5]:40015", "[fd00:96::10]:53", "[fd00:10:244:3::3]:53"), // IPv6 stale
		flow(model.UDP, "10.244.0.5:40016", "10.96.0.10:53", "10.244.1.5:5353"),                // target port changed
	}
}

func TestStaleConntrack(t *testing.T) {
	in, cfg := hostGW()
	in.Desired = testDesired()
	in.Snapshot.Flows = testFlows()
	fs, info := Check(in, cfg, now)
	wantFindings(t, fs,
		"stale_conntrack conntrack tcp 10.96.0.10:53",
		"stale_conntrack conntrack udp 10.96.0.10:53",
		"stale_conntrack conntrack udp [fd00:96::10]:53",
		"stale_conntrack conntrack tcp 10.96.9.9:80",
		"stale_conntrack conntrack tcp *:30080",
	)
	if info.StaleConntrack[model.UDP] != 5 || info.StaleConntrack[model.TCP] != 3 {
		t.Errorf("counts %v, want UDP 5 TCP 3", info.StaleConntrack)
	}
	if info.FlowsChecked != len(in.Snapshot.Flows) {
		t.Errorf("checked %d", info.FlowsChecked)
	}
	udp := fs[1]
	if udp.Service != sp("kube-system", "kube-dns", "dns", model.UDP) || udp.Frontend == nil ||
		*udp.Frontend != clusterIP("10.96.0.10", 53, model.UDP) {
		t.Errorf("service/frontend: %+v", udp)
	}
	for _, want := range []string{"4 UDP conntrack entries", "10.244.1.5:5353, 10.244.3.3:53, 10.244.3.4:53", "kube-system/kube-dns:dns"} {
		if !strings.Contains(udp.Detail, want) {
			t.Errorf("detail %q lacks %q", udp.Detail, want)
		}
	}
	if len(udp.Evidence) != 3 || !strings.HasPrefix(udp.Evidence[1], "backend 10.244.3.3:53: 2 entries, e.g. udp 10.244.0.5:40002") {
		t.Errorf("evidence %q", udp.Evidence)
	}
	if fs[4].Service.Name != "web" {
		t.Errorf("node port flow attributed to %v", fs[4].Service)
	}
}

func TestConntrackHealthy(t *testing.T) {
	in, cfg := hostGW()
	in.Desired = testDesired()
	in.Snapshot.Flows = testFlows()[:1]
	fs, info := Check(in, cfg, now)
	wantFindings(t, fs)
	if info.StaleConntrack[model.TCP] != 0 || info.StaleConntrack[model.UDP] != 0 || len(info.StaleConntrack) != 2 {
		t.Errorf("counts %v", info.StaleConntrack)
	}
}

func TestConntrackSkipped(t *testing.T) {
	in, cfg := hostGW()
	in.Snapshot.Flows = testFlows()
	_, info := Check(in, cfg, now)
	if !strings.Contains(strings.Join(info.Skipped, ";"), "stale_conntrack: desired state unknown") {
		t.Errorf("skipped %q", info.Skipped)
	}
	in.Desired = testDesired()
	in.Snapshot.ConntrackUnavailable = "unsupported: no nf_conntrack_netlink"
	fs, info := Check(in, cfg, now)
	wantFindings(t, fs)
	if !strings.Contains(strings.Join(info.Skipped, ";"), "no nf_conntrack_netlink") {
		t.Errorf("skipped %q", info.Skipped)
	}
}

func TestClassifyForEvents(t *testing.T) {
	x := NewConntrackIndex(testDesired(), map[netip.Addr]bool{addr("192.168.1.10"): true})
	fe, stale := x.Classify(flow(model.TCP, "203.0.113.9:50000", "192.168.1.10:30080", "10.244.7.7:8080"))
	if !stale || fe.Kind != model.NodePort || fe.Port != 30080 {
		t.Errorf("got %v %v", fe, stale)
	}
	if _, stale := x.Classify(flow(model.TCP, "203.0.113.9:50000", "192.168.1.10:30080", "10.244.1.20:8080")); stale {
		t.Error("valid backend classified stale")
	}
}

// Issue 12 item 11: SYN_SENT entries that timed-out clients left behind (the
// dead backend never answered) are not counted; the finding says which TCP
// states were counted.
func TestStaleConntrackCountsOnlyLiveEntries(t *testing.T) {
	in, cfg := hostGW()
	in.Desired = testDesired()
	syn := func(src string) model.Flow {
		f := flow(model.TCP, src, "10.96.0.10:53", "10.244.3.3:53")
		f.TCPState = "SYN_SENT"
		return f
	}
	in.Snapshot.Flows = []model.Flow{syn("10.244.0.5:41001"), syn("10.244.0.5:41002")}
	fs, info := Check(in, cfg, now)
	wantFindings(t, fs)
	if info.StaleConntrack[model.TCP] != 0 {
		t.Errorf("SYN_SENT entries counted: %v", info.StaleConntrack)
	}
	closeWait := flow(model.TCP, "10.244.0.5:41004", "10.96.0.10:53", "10.244.3.3:53")
	closeWait.TCPState = "CLOSE_WAIT"
	in.Snapshot.Flows = append(in.Snapshot.Flows,
		flow(model.TCP, "10.244.0.5:41003", "10.96.0.10:53", "10.244.3.3:53"), closeWait)
	fs, info = Check(in, cfg, now)
	wantFindings(t, fs, "stale_conntrack conntrack tcp 10.96.0.10:53")
	if info.StaleConntrack[model.TCP] != 2 {
		t.Errorf("counts %v, want TCP 2 (ESTABLISHED and CLOSE_WAIT)", info.StaleConntrack)
	}
	for _, want := range []string{"2 TCP conntrack entries (counted: CLOSE_WAIT 1, ESTABLISHED 1; not counted: 2 SYN_SENT entries"} {
		if !strings.Contains(fs[0].Detail, want) {
			t.Errorf("detail %q lacks %q", fs[0].Detail, want)
		}
	}
}
