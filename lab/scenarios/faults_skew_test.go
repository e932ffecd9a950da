package scenarios

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netdrift/netdrift/lab/labenv"
)

// testFaultTriggerSkew: a Service without selector whose EndpointSlice the
// test manages, written with a last-change-trigger-time an hour in the
// future, then two days in the past (a control plane with a skewed clock),
// then a plausible one. Every node measures each change's node lag
// (T2-T1, seconds at most); the skewed changes get no network latency
// (T2-T0) and are counted in netdrift_trigger_time_skew_total by
// direction and noted in /v1/status; the plausible one gets a network
// latency no shorter than its node lag.
func testFaultTriggerSkew(t *testing.T, e *env) {
	l := e.lab
	ctx := context.Background()
	const name = "fskew"
	svc := "default/" + name
	s, err := l.CreateService(ctx, labenv.ServiceSpec{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	cip := s.Spec.ClusterIP
	t.Cleanup(func() {
		_ = l.Clientset().DiscoveryV1().EndpointSlices("default").Delete(context.Background(), name+"-manual", metav1.DeleteOptions{})
		deleteAll(l, name)
	})
	podSel := map[string]string{"app": name + "-pods"}
	p1 := createPod(t, l, name+"-p1", "node-1", podSel, 0)
	p2 := createPod(t, l, name+"-p2", "node-2", podSel, 0)
	t.Cleanup(func() {
		_ = l.Clientset().CoreV1().Pods("default").DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: labenv.Grace(0)},
			metav1.ListOptions{LabelSelector: "app=" + name + "-pods"})
	})
	agents := agentsOf(t, l)
	// The Service without endpoints is a change of its own (a frontend
	// that rejects): measured before the slice is written.
	for _, a := range agents {
		waitChangesMeasured(t, a, svc, s.CreationTimestamp.Add(-time.Second), 1, 30*time.Second)
	}
	type counts struct{ future, past, latency float64 }
	countsOf := func(a *Agent) counts {
		return counts{
			future:  metricOf(t, a, "netdrift_trigger_time_skew_total", map[string]string{"direction": "future"}),
			past:    metricOf(t, a, "netdrift_trigger_time_skew_total", map[string]string{"direction": "past"}),
			latency: metricOf(t, a, "netdrift_network_programming_latency_seconds_count", nil),
		}
	}
	for _, step := range []struct {
		what     string
		trigger  time.Duration // from now
		pods     []podInfo
		skewed   string // "future", "past" or ""
		latency0 bool   // want no network latency
	}{
		{"an hour in the future", time.Hour, []podInfo{p1}, "future", true},
		{"two days in the past", -48 * time.Hour, []podInfo{p1, p2}, "past", true},
		{"plausible", -100 * time.Millisecond, []podInfo{p2}, "", false},
	} {
		before := map[string]counts{}
		for _, a := range agents {
			before[a.Node] = countsOf(a)
		}
		since := time.Now()
		if err := writeSlice(ctx, l, name, step.pods, since.Add(step.trigger)); err != nil {
			t.Fatal(err)
		}
		waitProgrammed(t, l, cip, backendsOf(step.pods), 60*time.Second)
		for _, a := range agents {
			got := waitChangesMeasured(t, a, svc, since, 1, 30*time.Second)
			sm := got[len(got)-1]
			after := countsOf(a)
			b := before[a.Node]
			t.Logf("%s: trigger time %s: sample %s network latency %v; skew future %v past %v",
				a.Node, step.what, describeSamples(got), fmtLatency(sm.NetworkLatencySeconds), after.future-b.future, after.past-b.past)
			if sm.NodeLagSeconds < 0 || sm.NodeLagSeconds > 10 {
				t.Errorf("%s: %s: node lag %.3fs, want 0-10 s", a.Node, step.what, sm.NodeLagSeconds)
			}
			wantF, wantP := 0.0, 0.0
			switch step.skewed {
			case "future":
				wantF = 1
			case "past":
				wantP = 1
			}
			if after.future-b.future != wantF || after.past-b.past != wantP {
				t.Errorf("%s: %s: skew counted future +%v past +%v, want +%v +%v", a.Node, step.what, after.future-b.future, after.past-b.past, wantF, wantP)
			}
			switch {
			case step.latency0 && (sm.NetworkLatencySeconds != nil || after.latency != b.latency):
				t.Errorf("%s: %s: network latency %s (histogram +%v) from a skewed trigger time", a.Node, step.what, fmtLatency(sm.NetworkLatencySeconds), after.latency-b.latency)
			case !step.latency0 && (sm.NetworkLatencySeconds == nil || *sm.NetworkLatencySeconds < sm.NodeLagSeconds || *sm.NetworkLatencySeconds > 10):
				t.Errorf("%s: %s: network latency %s, want between the node lag %.3fs and 10 s", a.Node, step.what, fmtLatency(sm.NetworkLatencySeconds), sm.NodeLagSeconds)
			}
			if step.skewed != "" {
				var st struct {
					Notes []string `json:"notes"`
				}
				if err := a.Get(ctx, "/v1/status", &st); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(strings.Join(st.Notes, "\n"), "trigger times ignored as skewed") {
					t.Errorf("%s: %s: /v1/status notes %q do not say so", a.Node, step.what, st.Notes)
				}
			}
		}
	}
	waitConverged(t, agents, svc, 30*time.Second)
}

func fmtLatency(v *float64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("%.3fs", *v)
}

// writeSlice creates or replaces the test-managed EndpointSlice of the
// selectorless Service name: pods as ready endpoints on port 8080, with
// the given trigger time.
func writeSlice(ctx context.Context, l *labenv.Lab, name string, pods []podInfo, trigger time.Time) error {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-manual",
			Labels:      map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "netdrift-lab"},
			Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": trigger.UTC().Format(time.RFC3339Nano)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP),
			Port: ptr.To(int32(labenv.DefaultPodPort))}},
	}
	for _, p := range pods {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.IP}, NodeName: ptr.To(p.Node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	c := l.Clientset().DiscoveryV1().EndpointSlices("default")
	old, err := c.Get(ctx, es.Name, metav1.GetOptions{})
	if err != nil {
		_, err = c.Create(ctx, es, metav1.CreateOptions{})
		return err
	}
	es.ResourceVersion = old.ResourceVersion
	_, err = c.Update(ctx, es, metav1.UpdateOptions{})
	return err
}
