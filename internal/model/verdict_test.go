package model

import (
	"net/netip"
	"testing"
)

// TestVerdictEqual: every field counts, and a nil list equals an empty one.
func TestVerdictEqual(t *testing.T) {
	base := func() Verdict {
		return Verdict{Service: ServicePort{ServiceName: ServiceName{Namespace: "shop", Name: "web"}, Protocol: TCP}, Action: Forward,
			Backends:  []netip.AddrPort{netip.MustParseAddrPort("10.1.0.1:80")},
			Endpoints: []Endpoint{{Addr: netip.MustParseAddrPort("10.1.0.1:80"), Ready: true}},
			Evidence:  []string{"ready"}}
	}
	if !base().Equal(base()) {
		t.Fatal("two equal verdicts differ")
	}
	if !(Verdict{Action: Reject}).Equal(Verdict{Action: Reject, Backends: []netip.AddrPort{}, Evidence: []string{}}) {
		t.Error("a nil list and an empty one differ")
	}
	for name, change := range map[string]func(*Verdict){
		"service":   func(v *Verdict) { v.Service.Port = "http" },
		"action":    func(v *Verdict) { v.Action = Reject },
		"backends":  func(v *Verdict) { v.Backends = append(v.Backends, netip.MustParseAddrPort("10.1.0.2:80")) },
		"endpoints": func(v *Verdict) { v.Endpoints[0].Terminating = true },
		"uncertain": func(v *Verdict) { v.Uncertain = "why" },
		"evidence":  func(v *Verdict) { v.Evidence[0] = "not ready" },
	} {
		v := base()
		change(&v)
		if v.Equal(base()) || base().Equal(v) {
			t.Errorf("verdicts differing in %s are equal", name)
		}
	}
}
