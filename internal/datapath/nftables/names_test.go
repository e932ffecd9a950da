package nftables

import (
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func TestNFTNameResolve(t *testing.T) {
	web := model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns1", Name: "web"}, Port: "http", Protocol: model.TCP}
	ix := newNFTNameIndex([]model.ServicePort{web})
	for _, tc := range []struct {
		chain   string
		want    model.ServicePort
		errHas  string
		partial bool
	}{
		{"service-DK7ABAZC-ns1/web/tcp/http", web, "", false},
		{"external-DK7ABAZC-whatever...", web, "", false}, // known hash wins, even truncated
		{"local-2QRHZV4L-default/kubernetes/tcp/https", model.ServicePort{ServiceName: model.ServiceName{Namespace: "default", Name: "kubernetes"}, Port: "https", Protocol: model.TCP}, "", false},
		{"service-LNSA5CYW-ns1/empty/tcp/", model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns1", Name: "empty"}, Protocol: model.TCP}, "", false},
		{"service-AAAAAAAA-ns1/other/udp/dns", model.ServicePort{ServiceName: model.ServiceName{Namespace: "ns1", Name: "other"}, Port: "dns", Protocol: model.UDP}, "does not match", true},
		{"service-AAAAAAAA-ns1/very-long...", model.ServicePort{}, "truncated", false},
		{"endpoint-FZTQNVQF-ns1/web/tcp/http__10.1.0.5/8080", model.ServicePort{}, "not a kube-proxy service chain", false},
		{"services", model.ServicePort{}, "not a kube-proxy service chain", false},
		{"service-BBBBBBBB-ns1/web/icmp/http", model.ServicePort{}, "unknown protocol", false},
	} {
		got, err := ix.resolve(tc.chain)
		if tc.errHas == "" && err != nil || tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("%s: error %v, want one containing %q", tc.chain, err, tc.errHas)
		}
		if (tc.errHas == "" || tc.partial) && got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.chain, got, tc.want)
		}
	}
}

func TestNFTParsePortComment(t *testing.T) {
	for in, want := range map[string]string{
		"shop/payments:https": "shop/payments:https",
		"ns1/empty":           "ns1/empty",
		"":                    "",
		"noslash":             "",
		"a/b:c:d":             "",
	} {
		sp, ok := nftParsePortComment(in, model.TCP)
		if got := sp.String(); got != want || ok != (want != "") {
			t.Errorf("%q: got %q %v, want %q", in, got, ok, want)
		}
	}
}
