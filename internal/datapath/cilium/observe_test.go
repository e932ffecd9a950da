package cilium

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

var (
	vip   = netip.MustParseAddr("10.96.0.10")
	node  = netip.MustParseAddr("192.168.1.5")
	pod1  = netip.MustParseAddr("10.244.1.2")
	pod2  = netip.MustParseAddr("10.244.2.3")
	pod3  = netip.MustParseAddr("10.244.3.4")
	any4  = netip.IPv4Unspecified()
	vip6  = netip.MustParseAddr("fd00::10")
	pod61 = netip.MustParseAddr("fd00:244::2")
)

// frontend builds the entries cilium-agent writes for one frontend: the
// master, count selectable slots, then the parked ones.
func frontend(addr netip.Addr, port uint16, scope, flags, flags2 uint8, sel, parked []uint32) []svcEntry {
	m := svcEntry{Addr: addr, Port: port, Proto: 6, Scope: scope, Count: uint16(len(sel)), QCount: uint16(len(parked)),
		RevNat: 7, Flags: flags, Flags2: flags2}
	out := []svcEntry{m}
	for i, id := range append(slices.Clone(sel), parked...) {
		out = append(out, svcEntry{Addr: addr, Port: port, Proto: 6, Scope: scope, Slot: uint16(i + 1), BackendID: id, RevNat: 7})
	}
	return out
}

func be(a netip.Addr, state uint8) backendEntry {
	return backendEntry{Addr: a, Port: 8080, Proto: 6, State: state}
}

func ap(a netip.Addr) netip.AddrPort { return netip.AddrPortFrom(a, 8080) }

func TestObserveRules(t *testing.T) {
	bes := map[uint32]backendEntry{1: be(pod1, stateActive), 2: be(pod2, stateActive), 3: be(pod3, stateTerminating),
		4: be(pod3, stateTerminating), 61: {Addr: pod61, Port: 8080, Proto: 6}}
	cip := model.NewFrontend(vip, 80, model.TCP, model.ClusterIP)
	np := model.NewNodePort(30080, model.TCP, model.IPv4)
	cases := []struct {
		name     string
		svcs     []svcEntry
		want     map[model.Frontend][]netip.AddrPort
		evidence string // a substring of the frontend's evidence
		warn     string // a substring of a warning
	}{
		{name: "selectable slots are the backends",
			svcs: frontend(vip, 80, 0, 0, 0, []uint32{1, 2}, nil),
			want: map[model.Frontend][]netip.AddrPort{cip: {ap(pod1), ap(pod2)}}},
		{name: "parked terminating slot is evidence, not a backend",
			svcs:     frontend(vip, 80, 0, 0, 0, []uint32{1}, []uint32{3}),
			want:     map[model.Frontend][]netip.AddrPort{cip: {ap(pod1)}},
			evidence: "parked"},
		{name: "terminating fallback: terminating backends selectable when none is active",
			svcs:     frontend(vip, 80, 0, 0, 0, []uint32{4}, nil),
			want:     map[model.Frontend][]netip.AddrPort{cip: {ap(pod3)}},
			evidence: "no active backend"},
		{name: "no selectable slot rejects",
			svcs: frontend(vip, 80, 0, 0, 0, nil, nil),
			want: map[model.Frontend][]netip.AddrPort{cip: nil}},
		{name: "wildcard entry is not compared",
			svcs: frontend(vip, 0, 0, 0, 0, nil, nil),
			want: map[model.Frontend][]netip.AddrPort{}},
		{name: "node-port entries per address collapse into one node port",
			svcs: append(frontend(any4, 30080, 0, flagNodePort, 0, []uint32{1, 2}, nil),
				frontend(node, 30080, 0, flagNodePort, 0, []uint32{1, 2}, nil)...),
			want: map[model.Frontend][]netip.AddrPort{np: {ap(pod1), ap(pod2)}}},
		{name: "node-port entries that differ are warned, any-address compared",
			svcs: append(frontend(any4, 30080, 0, flagNodePort, 0, []uint32{1, 2}, nil),
				frontend(node, 30080, 0, flagNodePort, 0, []uint32{1}, nil)...),
			want: map[model.Frontend][]netip.AddrPort{np: {ap(pod1), ap(pod2)}},
			warn: "node-address entries differ"},
		{name: "internal scope twin is evidence on the external frontend",
			svcs: append(frontend(node, 30080, scopeExternal, flagNodePort|flagExtLocalScope, flag2TwoScopes, []uint32{1}, nil),
				frontend(node, 30080, scopeInternal, flagNodePort|flagExtLocalScope, flag2TwoScopes, []uint32{1, 2}, nil)...),
			want:     map[model.Frontend][]netip.AddrPort{np: {ap(pod1)}},
			evidence: "internal scope"},
		{name: "host port not compared",
			svcs: frontend(node, 8081, 0, flagHostPort, 0, []uint32{1}, nil),
			want: map[model.Frontend][]netip.AddrPort{},
			warn: "host-port"},
		{name: "slot naming a missing backend is warned",
			svcs: frontend(vip, 80, 0, 0, 0, []uint32{1, 99}, nil),
			want: map[model.Frontend][]netip.AddrPort{cip: {ap(pod1)}},
			warn: "name no backend"},
		{name: "IPv6",
			svcs: frontend(vip6, 80, 0, 0, 0, []uint32{61}, nil),
			want: map[model.Frontend][]netip.AddrPort{model.NewFrontend(vip6, 80, model.TCP, model.ClusterIP): {netip.AddrPortFrom(pod61, 8080)}}},
		{name: "external IP and load balancer kinds from the flags",
			svcs: append(frontend(node, 80, 0, flagExternalIP, 0, []uint32{1}, nil),
				frontend(netip.MustParseAddr("172.18.0.9"), 80, 0, flagLoadBalancer, 0, []uint32{1}, nil)...),
			want: map[model.Frontend][]netip.AddrPort{
				model.NewFrontend(node, 80, model.TCP, model.ExternalIP):                                {ap(pod1)},
				model.NewFrontend(netip.MustParseAddr("172.18.0.9"), 80, model.TCP, model.LoadBalancer): {ap(pod1)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obs := observe(c.svcs, bes, model.Hints{})
			if obs.Datapath != model.ModeCilium {
				t.Errorf("datapath %q", obs.Datapath)
			}
			if len(obs.Frontends) != len(c.want) {
				t.Fatalf("frontends %v, want %v", obs.Frontends, c.want)
			}
			for fe, want := range c.want {
				v, ok := obs.Frontends[fe]
				if !ok {
					t.Fatalf("no frontend %v in %v", fe, obs.Frontends)
				}
				if !slices.Equal(v.Backends, want) {
					t.Errorf("%v backends %v, want %v", fe, v.Backends, want)
				}
				if wantAct := model.Forward; len(want) == 0 && v.Action != model.Reject || len(want) > 0 && v.Action != wantAct {
					t.Errorf("%v action %s", fe, v.Action)
				}
				if c.evidence != "" && !strings.Contains(strings.Join(v.Evidence, "\n"), c.evidence) {
					t.Errorf("evidence %q lacks %q", v.Evidence, c.evidence)
				}
			}
			if c.warn != "" && !strings.Contains(strings.Join(obs.Warnings, "\n"), c.warn) {
				t.Errorf("warnings %q lack %q", obs.Warnings, c.warn)
			}
			if c.warn == "" && len(obs.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", obs.Warnings)
			}
		})
	}
}

func TestObserveNamesServiceFromHints(t *testing.T) {
	cip := model.NewFrontend(vip, 80, model.TCP, model.ClusterIP)
	sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "cart"}, Protocol: model.TCP}
	obs := observe(frontend(vip, 80, 0, 0, 0, []uint32{1}, nil), map[uint32]backendEntry{1: be(pod1, 0)},
		model.Hints{Frontends: map[model.Frontend]model.ServicePort{cip: sp}})
	if got := obs.Frontends[cip].Service; got != sp {
		t.Errorf("service %v, want %v", got, sp)
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	for _, e := range []svcEntry{
		{Addr: vip, Port: 443, Slot: 3, Proto: 6, Scope: 1, BackendID: 70000, Count: 2, QCount: 1, RevNat: 513, Flags: 0x42, Flags2: 0x10},
		{Addr: vip6, Port: 53, Proto: 17, Count: 5, RevNat: 2},
	} {
		k, v := encodeService(e)
		got, err := decodeService(k, v)
		if err != nil || got != e {
			t.Errorf("service %+v -> %+v, %v", e, got, err)
		}
	}
	for _, b := range []backendEntry{{Addr: pod1, Port: 8080, Proto: 6, State: 1, ClusterID: 3, Zone: 2}, {Addr: pod61, Port: 9, Proto: 17}} {
		k, v := encodeBackend(77, b)
		id, got, err := decodeBackend(k, v)
		if err != nil || id != 77 || got != b {
			t.Errorf("backend %+v -> %d %+v, %v", b, id, got, err)
		}
	}
	if _, err := decodeService(make([]byte, 12), make([]byte, 16)); err == nil {
		t.Error("a 16-byte service value was accepted")
	}
	if _, _, err := decodeBackend(make([]byte, 4), make([]byte, 20)); err == nil {
		t.Error("a 20-byte backend value was accepted")
	}
}

// The key's port and the value's rev-NAT id are in network byte order,
// the slot and counts in host order (bpf/lib/lb.h).
func TestDecodeByteOrder(t *testing.T) {
	k := []byte{10, 96, 0, 10, 0x01, 0xbb, 2, 0, 6, 0, 0, 0}
	v := []byte{5, 0, 0, 0, 3, 0, 0x02, 0x01, 0x02, 0x10, 1, 0}
	e, err := decodeService(k, v)
	if err != nil {
		t.Fatal(err)
	}
	if e.Port != 443 || e.Slot != 2 || e.BackendID != 5 || e.Count != 3 || e.RevNat != 513 || e.QCount != 1 || e.Flags != flagNodePort {
		t.Errorf("decoded %+v", e)
	}
}

func TestFindBPFFS(t *testing.T) {
	info := `22 1 0:21 / /proc rw,nosuid - proc proc rw
35 22 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw
41 30 0:35 / /run/cilium/bpf\040fs rw,relatime shared:17 - bpf bpf rw,mode=700
42 30 0:36 / /sys/fs/bpf rw - bpf bpf rw
`
	got, err := FindBPFFS(strings.NewReader(info))
	if err != nil || got != "/run/cilium/bpf fs" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := FindBPFFS(strings.NewReader("22 1 0:21 / /proc rw - proc proc rw\n")); err == nil || !strings.Contains(err.Error(), "--bpffs") {
		t.Errorf("no bpffs: %v", err)
	}
}
