package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/report"
	"github.com/netdrift/netdrift/internal/report/publish"
)

// reportFlags configure the NodeReport publisher and the optional node
// condition and events.
type reportFlags struct {
	enabled   bool
	policy    report.Policy
	condition bool
	events    bool
}

func (f *reportFlags) register(fs *pflag.FlagSet) {
	d := report.DefaultPolicy()
	fs.BoolVar(&f.enabled, "node-report", true, "publish this node's NodeReport (netdrift.io/v1alpha1, named after the node) for cluster-wide queries; needs the CRD and RBAC of deploy/")
	fs.DurationVar(&f.policy.Heartbeat, "node-report-heartbeat", d.Heartbeat, "write the NodeReport at least this often (readers call a report older than a few heartbeats stale)")
	fs.DurationVar(&f.policy.MinInterval, "node-report-min-interval", d.MinInterval, "write the NodeReport at most once per this interval when its findings, view, watch health, degraded set or datapath change")
	fs.IntVar(&f.policy.MaxFindings, "node-report-max-findings", d.MaxFindings, "list at most this many stale findings in the NodeReport (oldest first; the counts cover all)")
	fs.BoolVar(&f.condition, "node-condition", false, "set the NetdriftStaleDatapath condition on this node's Node while stale findings last (needs --node-report and nodes/status patch)")
	fs.BoolVar(&f.events, "node-events", false, "record Events on this node's Node when stale findings are raised or cleared (needs --node-report and events create/patch)")
}

// validate checks the publisher's settings.
func (f *reportFlags) validate() error {
	if !f.enabled {
		if f.condition || f.events {
			return errors.New("--node-condition and --node-events follow the NodeReport's writes: they need --node-report")
		}
		return nil
	}
	return f.policy.Validate()
}

// publisher builds the NodeReport publisher over the agent's answers, or
// nil when --node-report is off.
func (f *reportFlags) publisher(ctx context.Context, node string, a *agent.Agent, nodes func(string) *corev1.Node,
	client kubernetes.Interface, log *slog.Logger) *publish.Publisher {
	if !f.enabled {
		return nil
	}
	return publish.Wire(ctx, publish.Wiring{Node: node, Version: version, Policy: f.policy, Condition: f.condition, Events: f.events,
		Client: client, Log: log, Nodes: nodes,
		Inputs: func() report.Inputs { return report.InputsOf(a.SummaryState()) },
		Lag:    func() (map[string]api.Percentiles, int) { return report.LagOf(a.LagState()) }})
}

// reportStatus is the publisher's state for /v1/status.
func reportStatus(p *publish.Publisher) func() api.ReportStatus {
	if p == nil {
		return func() api.ReportStatus { return api.ReportStatus{} }
	}
	return p.Status
}
