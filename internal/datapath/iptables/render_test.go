package iptables

import (
	"fmt"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// renderObserved prints an observed state as stable text for golden files.
func renderObserved(obs model.Observed, filter func(model.Frontend, model.Verdict) bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "datapath: %s\n", obs.Datapath)
	n := 0
	for _, f := range model.SortedFrontends(obs.Frontends) {
		v := obs.Frontends[f]
		if filter != nil && !filter(f, v) {
			continue
		}
		n++
		svc := KubeProxyPortName(v.Service)
		if v.Service.IsZero() {
			svc = "?"
		}
		fmt.Fprintf(&b, "\n%s %s %s/%s %s -> %s", f.Family, f.Kind, f, f.Protocol, svc, v.Action)
		for _, be := range v.Backends {
			fmt.Fprintf(&b, " %s", be)
		}
		b.WriteString("\n")
		if v.Service.Protocol != f.Protocol && !v.Service.IsZero() {
			fmt.Fprintf(&b, "  ! service protocol %s\n", v.Service.Protocol)
		}
		for _, e := range v.Evidence {
			fmt.Fprintf(&b, "  | %s\n", e)
		}
	}
	fmt.Fprintf(&b, "\nfrontends: %d\n", n)
	for _, w := range obs.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}
