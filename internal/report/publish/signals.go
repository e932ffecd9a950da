package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/report"
)

// Node condition and event names (node-problem-detector's conventions: a
// condition for a lasting problem, an event for a passing one).
const (
	ConditionType       = "NetdriftStaleDatapath"
	ReasonStale         = "StaleFindings"
	ReasonClean         = "NoStaleFindings"
	EventRaised         = "StaleFindingsRaised"
	EventCleared        = "StaleFindingsCleared"
	ReportingController = "netdrift"
	messageFindings     = 3 // findings named in a message
)

// NodeSignals sets the node's NetdriftStaleDatapath condition from the last
// written report and records events when stale findings are raised or
// cleared: one event per kind of change per write, naming the first few.
type NodeSignals struct {
	Node      string
	Client    kubernetes.Interface
	Recorder  events.EventRecorder // nil: no events
	Condition bool
	Clock     clock.Clock
	Log       *slog.Logger

	want, applied *corev1.NodeCondition
	retryAt       time.Time
	backoff       *wait.Backoff
}

// Written records the events of a write and the condition it asks for.
func (s *NodeSignals) Written(_ context.Context, r report.Report, raised, cleared []api.Finding) {
	if s.Recorder != nil {
		ref := &corev1.ObjectReference{Kind: "Node", Name: s.Node, UID: types.UID(s.Node), APIVersion: "v1"}
		if len(raised) > 0 {
			s.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, EventRaised, "Audit",
				"%d stale finding(s) raised (%d stale in all): %s", len(raised), r.FindingsTotal, names(raised))
		}
		if len(cleared) > 0 {
			s.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, EventCleared, "Audit",
				"%d stale finding(s) cleared (%d stale in all): %s", len(cleared), r.FindingsTotal, names(cleared))
		}
	}
	if s.Condition {
		s.want = conditionOf(r)
	}
}

// Sync patches the condition when it differs from the one last patched.
func (s *NodeSignals) Sync(ctx context.Context) {
	if s.want == nil || (s.applied != nil && s.applied.Status == s.want.Status && s.applied.Message == s.want.Message) {
		return
	}
	now := s.Clock.Now()
	if now.Before(s.retryAt) {
		return
	}
	if s.applied == nil {
		s.applied = s.current(ctx) // keep the transition time a previous agent set
	}
	c := *s.want
	c.LastHeartbeatTime = metav1.NewTime(now)
	c.LastTransitionTime = metav1.NewTime(now)
	if s.applied != nil && s.applied.Status == c.Status {
		c.LastTransitionTime = s.applied.LastTransitionTime
	}
	if err := s.patch(ctx, c); err != nil {
		if s.backoff == nil {
			s.backoff = &wait.Backoff{Duration: 5 * time.Second, Factor: 2, Jitter: 0.2, Steps: 64, Cap: 5 * time.Minute}
		}
		d := s.backoff.Step()
		s.retryAt = now.Add(d)
		s.Log.Warn("node condition: patch failed", "node", s.Node, "err", err, "retry_in", d.Round(time.Second))
		return
	}
	s.backoff, s.applied = nil, &c
}

// current is the node's netdrift condition as stored, nil if none or
// unreadable.
func (s *NodeSignals) current(ctx context.Context) *corev1.NodeCondition {
	n, err := s.Client.CoreV1().Nodes().Get(ctx, s.Node, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionType {
			return &c
		}
	}
	return nil
}

// patch changes only the netdrift condition: a strategic merge patch of
// status.conditions merges by type.
func (s *NodeSignals) patch(ctx context.Context, c corev1.NodeCondition) error {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
	if err != nil {
		return err
	}
	_, err = s.Client.CoreV1().Nodes().PatchStatus(ctx, s.Node, body)
	return err
}

func conditionOf(r report.Report) *corev1.NodeCondition {
	if r.FindingsTotal == 0 {
		return &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonClean,
			Message: "netdrift finds no stale kube-proxy rule, route or conntrack entry on this node"}
	}
	var first []string
	for i, f := range r.Findings {
		if i == messageFindings {
			break
		}
		first = append(first, name(f.Backend, f.Kind, f.Service, f.Frontend, f.Subject))
	}
	return &corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionTrue, Reason: ReasonStale,
		Message: fmt.Sprintf("%d stale finding(s), first: %s (netdrift drift on this node lists them)", r.FindingsTotal, strings.Join(first, "; "))}
}

func names(fs []api.Finding) string {
	var out []string
	for i, f := range fs {
		if i == messageFindings {
			out = append(out, fmt.Sprintf("and %d more", len(fs)-i))
			break
		}
		out = append(out, name(f.Backend, f.Kind, f.Service, f.Frontend, f.Subject))
	}
	return strings.Join(out, "; ")
}

// name is "kind service frontend subject -> backend", skipping what is empty.
func name(backend string, parts ...string) string {
	var s []string
	for _, p := range parts {
		if p != "" {
			s = append(s, p)
		}
	}
	out := strings.Join(s, " ")
	if backend != "" {
		out += " -> " + backend
	}
	return out
}
