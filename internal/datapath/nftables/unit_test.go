package nftables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func TestNFTNameResolve(t *testing.T) {
	web := model.ServicePort{Namespace: "ns1", Name: "web", Port: "http", Protocol: model.TCP}
	ix := newNFTNameIndex([]model.ServicePort{web})
	for _, tc := range []struct {
		chain   string
		want    model.ServicePort
		errHas  string
		partial bool
	}{
		{"service-DK7ABAZC-ns1/web/tcp/http", web, "", false},
		{"external-DK7ABAZC-whatever...", web, "", false}, // known hash wins, even truncated
		{"local-2QRHZV4L-default/kubernetes/tcp/https", model.ServicePort{Namespace: "default", Name: "kubernetes", Port: "https", Protocol: model.TCP}, "", false},
		{"service-LNSA5CYW-ns1/empty/tcp/", model.ServicePort{Namespace: "ns1", Name: "empty", Protocol: model.TCP}, "", false},
		{"service-AAAAAAAA-ns1/other/udp/dns", model.ServicePort{Namespace: "ns1", Name: "other", Port: "dns", Protocol: model.UDP}, "does not match", true},
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

func TestParseNFTJSONErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, has string }{
		{"syntax", "{\n  \"nftables\": [\n    {\"table\": }\n]}", "line 3"},
		{"type", `{"nftables": {"a": 1}}`, "line 1"},
		{"map element", `{"nftables": [{"map": {"family": "ip", "table": "kube-proxy", "name": "service-ips", "elem": [[1]]}}]}`, "nftables[0]: map service-ips: element 0"},
		{"bad dnat", `{"nftables": [{"rule": {"family": "ip", "table": "kube-proxy", "chain": "c", "handle": 7, "expr": [{"dnat": {"addr": "not-an-ip"}}]}}]}`, "rule 7 in chain c"},
		{"goto without target", `{"nftables": [{"rule": {"family": "ip", "table": "kube-proxy", "chain": "c", "handle": 8, "expr": [{"goto": {}}]}}]}`, "without target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(tc.in), nil, model.Hints{})
			if err == nil || !strings.Contains(err.Error(), tc.has) {
				t.Errorf("error %v, want one containing %q", err, tc.has)
			}
		})
	}
}

func TestParseNFTJSONNoTables(t *testing.T) {
	obs, err := ParseJSON(nil, []byte(" \n"), model.Hints{})
	if err != nil || obs.Datapath != model.ModeNFTables || len(obs.Frontends) != 0 || len(obs.Warnings) != 1 {
		t.Errorf("got %+v, %v", obs, err)
	}
	// A dump of another table is not kube-proxy's.
	obs, err = ParseJSON([]byte(`{"nftables": [{"table": {"family": "ip", "name": "filter"}}]}`), nil, model.Hints{})
	if err != nil || len(obs.Warnings) != 1 || !strings.Contains(obs.Warnings[0], "no table") {
		t.Errorf("got %+v, %v", obs, err)
	}
}

// nftTestTable builds a table from chains given as rules, for the evaluator.
func nftTestTable(chains map[string][]nftRule) *nftTable {
	t := newNFTTable(model.IPv4)
	for n, rs := range chains {
		for i := range rs {
			rs[i].normalize()
		}
		t.Chains[n] = rs
	}
	return t
}

func TestNFTEvaluator(t *testing.T) {
	gotoV := func(c string) nftVerdict { return nftVerdict{Kind: nftVerdictGoto, Target: c} }
	jumpV := func(c string) nftVerdict { return nftVerdict{Kind: nftVerdictJump, Target: c} }
	ep := func(s string) nftRule { return nftRule{Proto: "tcp", DNAT: mustAddrPorts(s)} }
	tb := nftTestTable(map[string][]nftRule{
		"mark":      {{}},
		"ep1":       {ep("10.0.0.1:80")},
		"ep2":       {ep("10.0.0.2:80")},
		"svc":       {{Conditional: true, Verdict: gotoV("ep1")}, {Verdict: jumpV("mark")}, {VMap: []nftVerdict{gotoV("ep2"), gotoV("ep1")}}},
		"loop":      {{Verdict: jumpV("loop")}},
		"missing":   {{Verdict: gotoV("nope")}},
		"ret":       {{Verdict: nftVerdict{Kind: nftVerdictReturn}}, ep("10.0.0.9:80")},
		"accept":    {{Verdict: nftVerdict{Kind: nftVerdictAccept}}, ep("10.0.0.9:80")},
		"jumpfall":  {{Verdict: jumpV("mark")}, {Verdict: nftVerdict{Kind: nftVerdictDrop}}},
		"reject":    {{Verdict: nftVerdict{Kind: nftVerdictReject}}},
		"empty":     nil,
		"halfvmap":  {{VMap: []nftVerdict{gotoV("ep1"), gotoV("empty")}}},
		"condgoto":  {{Conditional: true, Verdict: gotoV("ep1")}},
		"gotofalls": {{Verdict: gotoV("empty")}, ep("10.0.0.9:80")},
	})
	for _, tc := range []struct {
		chain    string
		action   model.Action
		backends string
		warn     string
	}{
		{"svc", model.Forward, "10.0.0.1:80 10.0.0.2:80", ""},
		{"loop", "", "", "loop"},
		{"missing", "", "", "does not exist"},
		{"ret", "", "", ""},
		{"accept", "", "", ""},
		{"jumpfall", model.Drop, "", ""},
		{"reject", model.Reject, "", ""},
		{"empty", "", "", ""},
		{"halfvmap", model.Forward, "10.0.0.1:80", "does not forward"},
		{"condgoto", "", "", ""},
		{"gotofalls", "", "", ""},
	} {
		o := newNFTEvaluator(tb).chain(tc.chain, 0)
		var bs []string
		for _, b := range o.Backends {
			bs = append(bs, b.String())
		}
		w := strings.Join(o.Warnings, ";")
		if o.Action != tc.action || strings.Join(bs, " ") != tc.backends || (tc.warn == "") != (w == "") || !strings.Contains(w, tc.warn) {
			t.Errorf("%s: got %q %v warnings %q; want %q %q %q", tc.chain, o.Action, bs, w, tc.action, tc.backends, tc.warn)
		}
		if len(o.Evidence) == 0 {
			t.Errorf("%s: no evidence", tc.chain)
		}
	}
}

func mustAddrPorts(s ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, x := range s {
		out = append(out, netip.MustParseAddrPort(x))
	}
	return out
}
