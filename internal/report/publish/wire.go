package publish

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/report"
)

// Wiring is what the agent hands the publisher: its node, version, the
// write policy, the opt-in signals, the client, and its answers.
type Wiring struct {
	Node, Version     string
	Policy            report.Policy
	Condition, Events bool // --node-condition, --node-events
	Client            kubernetes.Interface
	Log               *slog.Logger
	// Nodes reads the watch's Node cache (the report's owner: current, and free).
	Nodes  func(name string) *corev1.Node
	Inputs func() report.Inputs
	Lag    func() (map[string]api.Percentiles, int)
}

// Wire builds the publisher: Server-Side Apply through the client, the
// report owned by its Node, and the node condition and events when asked
// for (events through client-go's events broadcaster, stopped with ctx).
func Wire(ctx context.Context, w Wiring) *Publisher {
	clk := clock.RealClock{}
	cfg := Config{Node: w.Node, Version: w.Version, Policy: w.Policy, Clock: clk, Log: w.Log,
		Writer: Applier{Client: w.Client.Discovery().RESTClient()},
		Inputs: w.Inputs, Lag: w.Lag,
		Owner: func() *metav1.OwnerReference {
			if n := w.Nodes(w.Node); n != nil {
				return &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}
			}
			return nil
		},
	}
	if w.Condition || w.Events {
		sig := &NodeSignals{Node: w.Node, Client: w.Client, Condition: w.Condition, Clock: clk, Log: w.Log}
		if w.Events {
			b := events.NewBroadcaster(&events.EventSinkImpl{Interface: w.Client.EventsV1()})
			b.StartStructuredLogging(0)
			b.StartRecordingToSink(ctx.Done())
			sig.Recorder = b.NewRecorder(scheme.Scheme, ReportingController)
		}
		cfg.Signals = sig
	}
	return New(cfg)
}
