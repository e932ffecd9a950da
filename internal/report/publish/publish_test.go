package publish

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/report"
)

// recorder stores what it is asked to apply, failing while err is set.
type recorder struct {
	mu      sync.Mutex
	err     error
	applied []report.NodeReport
}

func (r *recorder) Apply(_ context.Context, nr *report.NodeReport) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.applied = append(r.applied, *nr)
	return nil
}

// signals records what the publisher hands its signals.
type signals struct{ raised, cleared []string }

func (s *signals) Written(_ context.Context, _ report.Report, raised, cleared []api.Finding) {
	for _, f := range raised {
		s.raised = append(s.raised, f.Backend)
	}
	for _, f := range cleared {
		s.cleared = append(s.cleared, f.Backend)
	}
}
func (s *signals) Sync(context.Context) {}

type rig struct {
	clk  *clocktesting.FakeClock
	w    *recorder
	sig  *signals
	in   report.Inputs
	p    *Publisher
	step func(d time.Duration)
}

func newRig(t *testing.T) *rig {
	r := &rig{clk: clocktesting.NewFakeClock(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)), w: &recorder{}, sig: &signals{}}
	r.in = report.Inputs{Status: api.Status{Datapath: "iptables", View: &api.View{Current: true}, Watch: api.Watch{Healthy: true}}}
	r.p = New(Config{Node: "node-1", Version: "test", Policy: report.Policy{Heartbeat: 2 * time.Minute, MinInterval: 30 * time.Second, MaxFindings: 2},
		Inputs: func() report.Inputs { return r.in }, Writer: r.w, Signals: r.sig, Clock: r.clk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.step = func(d time.Duration) { r.clk.Step(d); r.p.Step(context.Background()) }
	return r
}

func stale(backend string) api.Finding {
	t := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	return api.Finding{Kind: "stale_backend", Service: "default/web", Backend: backend, FirstSeen: &t}
}

func (r *rig) writes() int { r.w.mu.Lock(); defer r.w.mu.Unlock(); return len(r.w.applied) }

func TestPublisherWritesOnChangeRateLimitedAndOnHeartbeat(t *testing.T) {
	r := newRig(t)
	r.step(0)
	if r.writes() != 1 || r.w.applied[0].Name != "node-1" || r.w.applied[0].Kind != report.Kind || r.w.applied[0].APIVersion != report.APIVersion {
		t.Fatalf("first step: %d writes %+v", r.writes(), r.w.applied)
	}
	r.in.Status.PendingChanges = 7 // rides along, no write
	r.step(10 * time.Second)
	if r.writes() != 1 {
		t.Fatalf("a pending-count change wrote the report")
	}
	r.in.Findings = []api.Finding{stale("10.0.0.1:80")}
	r.step(5 * time.Second) // 15 s after the last write: within --node-report-min-interval
	if r.writes() != 1 {
		t.Fatalf("a change 15 s after a write was written at once; min-interval is 30 s")
	}
	r.step(15 * time.Second)
	if r.writes() != 2 || r.w.applied[1].Report.FindingsTotal != 1 || r.w.applied[1].Report.PendingChanges != 7 {
		t.Fatalf("the change was not written at the end of the min-interval: %d writes", r.writes())
	}
	r.step(119 * time.Second)
	if r.writes() != 2 {
		t.Fatal("wrote before the heartbeat")
	}
	r.step(time.Second)
	if r.writes() != 3 {
		t.Fatal("no heartbeat write after 2 min")
	}
	if got := testutil.ToFloat64(r.p.writes.WithLabelValues("success")); got != 3 {
		t.Fatalf("netdrift_report_writes_total{result=success} %v, want 3", got)
	}
	if st := r.p.Status(); !st.Enabled || !st.LastWrite.Equal(r.clk.Now()) || st.LastError != "" {
		t.Fatalf("status %+v", st)
	}
}

func TestPublisherBacksOffOnErrorsUpToTheHeartbeat(t *testing.T) {
	r := newRig(t)
	r.w.err = errors.New("the server could not find the requested resource")
	r.step(0)
	if st := r.p.Status(); st.LastError == "" || !st.LastWrite.IsZero() {
		t.Fatalf("status after a failed write: %+v", st)
	}
	attempts := 1
	last := r.clk.Now()
	var gaps []time.Duration
	for range 600 { // 10 min in 1 s ticks
		before := testutil.ToFloat64(r.p.writes.WithLabelValues("error"))
		r.step(time.Second)
		if testutil.ToFloat64(r.p.writes.WithLabelValues("error")) > before {
			attempts++
			gaps = append(gaps, r.clk.Now().Sub(last))
			last = r.clk.Now()
		}
	}
	if len(gaps) < 3 || gaps[0] < 4*time.Second || gaps[0] > 7*time.Second || gaps[1] < gaps[0] {
		t.Fatalf("retry gaps %v: want from about 5 s, growing", gaps)
	}
	for _, g := range gaps {
		if g > 2*time.Minute+25*time.Second {
			t.Fatalf("retry gap %s exceeds the heartbeat (2 min) plus jitter: %v", g, gaps)
		}
	}
	r.w.err = nil
	// The next retry falls anywhere within one capped, jittered gap; it
	// succeeds, and the following write waits for the heartbeat.
	waited := time.Duration(0)
	for r.writes() == 0 && waited <= 2*time.Minute+25*time.Second {
		r.step(time.Second)
		waited += time.Second
	}
	if r.writes() != 1 || r.p.Status().LastError != "" {
		t.Fatalf("after recovery (%s): %d writes, status %+v", waited, r.writes(), r.p.Status())
	}
	for range 119 {
		r.step(time.Second)
	}
	if r.writes() != 1 {
		t.Fatalf("after recovery a second write came before the heartbeat: %d writes", r.writes())
	}
	t.Logf("%d failed attempts in 10 min, gaps %v", attempts, gaps)
}

func TestPublisherHandsRaisedAndClearedToSignals(t *testing.T) {
	r := newRig(t)
	r.in.Findings = []api.Finding{stale("10.0.0.1:80"), stale("10.0.0.2:80")}
	r.step(0)
	r.in.Findings = []api.Finding{stale("10.0.0.2:80"), stale("10.0.0.3:80")}
	r.step(30 * time.Second)
	if strings.Join(r.sig.raised, ",") != "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80" || strings.Join(r.sig.cleared, ",") != "10.0.0.1:80" {
		t.Fatalf("raised %v cleared %v", r.sig.raised, r.sig.cleared)
	}
	if n := len(r.w.applied[1].Report.Findings); n != 2 {
		t.Fatalf("listed %d findings", n)
	}
}

func TestNodeSignalsPatchOnlyTheirCondition(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}}
	cs := fake.NewClientset(node)
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	s := &NodeSignals{Node: "node-1", Client: cs, Condition: true, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	get := func() map[corev1.NodeConditionType]corev1.NodeCondition {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[corev1.NodeConditionType]corev1.NodeCondition{}
		for _, c := range n.Status.Conditions {
			out[c.Type] = c
		}
		return out
	}
	r := report.Build(report.Inputs{Findings: []api.Finding{stale("10.0.0.1:80")}}, report.Options{MaxFindings: 5})
	s.Written(ctx, r, nil, nil)
	s.Sync(ctx)
	c := get()
	if c[corev1.NodeReady].Reason != "KubeletReady" || c[ConditionType].Status != corev1.ConditionTrue || c[ConditionType].Reason != ReasonStale ||
		!strings.Contains(c[ConditionType].Message, "1 stale finding(s), first: stale_backend default/web -> 10.0.0.1:80") {
		t.Fatalf("conditions after a stale report: %+v", c)
	}
	raisedAt := c[ConditionType].LastTransitionTime
	clk.Step(time.Minute)
	s.Written(ctx, report.Build(report.Inputs{}, report.Options{}), nil, nil)
	s.Sync(ctx)
	c = get()
	if c[ConditionType].Status != corev1.ConditionFalse || c[ConditionType].Reason != ReasonClean || !c[ConditionType].LastTransitionTime.After(raisedAt.Time) ||
		c[corev1.NodeReady].Reason != "KubeletReady" {
		t.Fatalf("conditions after the heal: %+v", c)
	}
	patches := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	s.Sync(ctx)
	s.Written(ctx, report.Build(report.Inputs{}, report.Options{}), nil, nil)
	s.Sync(ctx)
	after := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" {
			after++
		}
	}
	if patches != 2 || after != 2 {
		t.Fatalf("%d patches for two different conditions, %d after the same condition again; want 2 and 2", patches, after)
	}
}

// One event per kind of change per write, naming the first three findings.
func TestNodeSignalsRecordOneEventPerKindOfChange(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	s := &NodeSignals{Node: "node-1", Recorder: rec, Clock: clocktesting.NewFakeClock(time.Now()), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var raised []api.Finding
	for _, b := range []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"} {
		raised = append(raised, stale(b))
	}
	s.Written(context.Background(), report.Report{FindingsTotal: 4}, raised, []api.Finding{stale("10.0.0.9:80")})
	s.Written(context.Background(), report.Report{FindingsTotal: 4}, nil, nil)
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 2 ||
		got[0] != "Warning StaleFindingsRaised 4 stale finding(s) raised (4 stale in all): stale_backend default/web -> 10.0.0.1:80; stale_backend default/web -> 10.0.0.2:80; stale_backend default/web -> 10.0.0.3:80; and 1 more" ||
		got[1] != "Normal StaleFindingsCleared 1 stale finding(s) cleared (4 stale in all): stale_backend default/web -> 10.0.0.9:80" {
		t.Fatalf("events %q", got)
	}
}

// The report is owned by its Node once the watch knows it; a new owner is a change.
func TestPublisherOwnsTheReportByItsNode(t *testing.T) {
	r := newRig(t)
	var owner *metav1.OwnerReference
	r.p.cfg.Owner = func() *metav1.OwnerReference { return owner }
	r.step(0)
	if len(r.w.applied[0].OwnerReferences) != 0 {
		t.Fatalf("owner references %+v before the Node is known", r.w.applied[0].OwnerReferences)
	}
	owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "uid-1"}
	r.step(10 * time.Second)
	if r.writes() != 1 {
		t.Fatal("a new owner was written within the min-interval")
	}
	r.step(20 * time.Second)
	if r.writes() != 2 || len(r.w.applied[1].OwnerReferences) != 1 || r.w.applied[1].OwnerReferences[0].UID != "uid-1" {
		t.Fatalf("after the min-interval: %d writes, owners %+v", r.writes(), r.w.applied[len(r.w.applied)-1].OwnerReferences)
	}
}
