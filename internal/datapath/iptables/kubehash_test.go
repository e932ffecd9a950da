package iptables

import (
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

// Chain names from the real kube-proxy v1.37 fixture (worker-a.iptables-save).
func TestChainHash(t *testing.T) {
	cases := []struct {
		sp   model.ServicePort
		want string
	}{
		{model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "frontend"}, Port: "web", Protocol: model.TCP}, "E3OOKNXMLSA7Q7GA"},
		{model.ServicePort{ServiceName: model.ServiceName{Namespace: "default", Name: "kubernetes"}, Port: "https", Protocol: model.TCP}, "NPX46M4PTMTKRN6Y"},
		{model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "cache"}, Port: "memcache-udp", Protocol: model.UDP}, "MGCN4A5EAMKCLNXU"},
		{model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "cart"}, Port: "grpc", Protocol: model.TCP}, "RNBIIQBVO5OVCMGW"},
		// Unnamed port: "ns/name" without a colon.
		{model.ServicePort{ServiceName: model.ServiceName{Namespace: "demo", Name: "dns"}, Protocol: model.UDP}, "TJ7R4GGTKLDTUOTY"},
	}
	for _, c := range cases {
		if got := ChainHash(c.sp); got != c.want {
			t.Errorf("ChainHash(%s/%s) = %s, want %s", KubeProxyPortName(c.sp), c.sp.Protocol, got, c.want)
		}
	}
	sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "frontend"}, Port: "web", Protocol: model.TCP}
	if got := EndpointChainHash(sp, "10.214.1.31:8080"); got != "PEZHKLRO2DGB6WYH" {
		t.Errorf("EndpointChainHash = %s, want PEZHKLRO2DGB6WYH", got)
	}
}

func TestParseKubePortName(t *testing.T) {
	cases := []struct {
		in   string
		want model.ServicePort
		ok   bool
	}{
		{"shop/cart:grpc", model.ServicePort{ServiceName: model.ServiceName{Namespace: "shop", Name: "cart"}, Port: "grpc", Protocol: model.TCP}, true},
		{"demo/dns", model.ServicePort{ServiceName: model.ServiceName{Namespace: "demo", Name: "dns"}, Protocol: model.TCP}, true},
		{"kubernetes", model.ServicePort{}, false},
		{"/x:y", model.ServicePort{}, false},
		{"ns/", model.ServicePort{}, false},
		{"a/b/c", model.ServicePort{}, false},
		{"a/b:c:d", model.ServicePort{}, false},
	}
	for _, c := range cases {
		got, ok := parseKubePortName(c.in, model.TCP)
		if ok != c.ok || got != c.want {
			t.Errorf("parseKubePortName(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
