package nodecheck

import (
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// Check runs every node rule over the inputs and returns the findings in a
// stable order, and what it looked at and decided. It is pure: now is the
// only clock it reads.
func Check(in Inputs, cfg Config, now time.Time) ([]model.Finding, Info) {
	w := newWorld(in, cfg, now)
	info := Info{
		PodNetwork:       w.podNet,
		PodNetworkSource: w.podNetSrc,
		StaleConntrack:   map[model.Protocol]int{model.TCP: 0, model.UDP: 0},
	}
	fs := endpointRule(w, in.Endpoints, in.EndpointsBySlice, &info)
	if s := in.Snapshot; s != nil {
		fs = append(fs, routeRules(w, s, &info)...)
		fs = append(fs, linkRules(w, in, s, &info)...)
		fs = append(fs, conntrackRule(w, in, s, &info)...)
	}
	model.SortFindings(fs)
	return fs, info
}
