package nftables

import (
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

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
