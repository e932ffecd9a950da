package report

import (
	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/api"
)

// InputsOf is what /v1/status and /v1/drift serve of the agent's state (the
// same conversions the handlers make), for Build.
func InputsOf(s agent.State) Inputs {
	return Inputs{Status: api.StatusOf(s, api.Providers{}), Findings: api.TrackedOf(s.Stale, s.Now)}
}

// LagOf is /v1/lag's node_lag percentiles and sample count of the agent's
// lag state (agent.Agent.LagState).
func LagOf(s agent.State) (map[string]api.Percentiles, int) {
	l := api.LagOf(s.Node, s.Recent, nil, s.Now)
	return l.NodeLag, len(l.Samples)
}
