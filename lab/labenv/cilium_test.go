package labenv

import (
	"reflect"
	"testing"
)

// The listing's format is Cilium v1.20.2's `cilium-dbg bpf lb list -o json`.
func TestParseCiliumBackends(t *testing.T) {
	listing := []byte(`{
  "10.96.0.1:443/TCP (0)": ["0.0.0.0:0 (1) (0) [ClusterIP, non-routable]"],
  "10.96.0.1:443/TCP (1)": ["10.99.0.1:6443/TCP (1) (1)"],
  "10.96.5.5:80/TCP (0)": ["0.0.0.0:0 (2) (0) [ClusterIP, non-routable]"],
  "10.96.5.5:80/TCP (2)": ["10.244.2.3:8080/TCP (2) (2)"],
  "10.96.5.5:80/TCP (1)": ["10.244.1.2:8080/TCP (2) (1)"],
  "10.96.5.5:80/UDP (1)": ["10.244.1.9:8080/UDP (3) (1)"],
  "10.96.5.55:80/TCP (1)": ["10.244.9.9:8080/TCP (4) (1)"]
}`)
	got, err := parseCiliumBackends(listing, "10.96.5.5", 80)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.244.1.2:8080", "10.244.2.3:8080"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, _ := parseCiliumBackends(listing, "10.96.7.7", 80); got != nil {
		t.Errorf("absent frontend: %v", got)
	}
	if _, err := parseCiliumBackends([]byte("not json"), "10.96.5.5", 80); err == nil {
		t.Error("bad listing accepted")
	}
}

// Options.CiliumLB: only in cilium mode, keyed by this lab's node names,
// naming plain files.
func TestOptionsCiliumLB(t *testing.T) {
	for _, c := range []struct {
		mode string
		lb   map[string]string
		ok   bool
	}{
		{"cilium", map[string]string{"node-1": "cilium-lb-1.19.1"}, true},
		{"cilium", nil, true},
		{"iptables", map[string]string{"node-1": "cilium-lb-1.19.1"}, false},
		{"cilium", map[string]string{"node-4": "cilium-lb-1.19.1"}, false},
		{"cilium", map[string]string{"node-0": "cilium-lb-1.19.1"}, false},
		{"cilium", map[string]string{"node-01": "cilium-lb-1.19.1"}, false},
		{"cilium", map[string]string{"node-1": "../cilium-lb"}, false},
		{"cilium", map[string]string{"node-1": ""}, false},
	} {
		o := Options{Nodes: 3, ProxyMode: c.mode, CiliumLB: c.lb}
		if err := o.checkCiliumLB(); (err == nil) != c.ok {
			t.Errorf("%s %v: error %v, want ok %v", c.mode, c.lb, err, c.ok)
		}
	}
}
