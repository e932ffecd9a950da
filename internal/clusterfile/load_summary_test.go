package clusterfile

import (
	"sort"

	"github.com/netdrift/netdrift/internal/model"
)

// summary renders verdicts as "service kind ip:port/proto -> action
// backends", one line per frontend, for the frontends of services in
// namespace ns (the form of watch's fixture tests).
func summary(d model.Desired, ns string) []string {
	var out []string
	for _, fe := range model.SortedFrontends(d.Frontends) {
		v := d.Frontends[fe]
		if v.Service.Namespace != ns {
			continue
		}
		s := v.Service.String() + " " + string(fe.Kind) + " " + fe.String() + "/" + string(fe.Protocol) + " -> " + string(v.Action)
		for _, b := range v.Backends {
			s += " " + b.String()
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
