package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/netdrift/netdrift/internal/testutil/wait"
	"github.com/netdrift/netdrift/internal/watch"
	"github.com/netdrift/netdrift/internal/watch/informer"
)

// The fake API plays the API server: a client-go fake clientset whose watches
// pass through a gate. Closing the gate models a hung API server or watch
// connection: objects still change in the API (kube-proxy may see them), but
// nothing reaches the agent until the gate opens again.
type fakeAPI struct {
	t  *testing.T
	cs *fake.Clientset

	mu      sync.Mutex
	open    bool
	cond    *sync.Cond
	watches int
}

const (
	testNS   = "shop"
	testSvc  = "web"
	nodeName = "node-a"
)

func newFakeAPI(t *testing.T, objs ...runtime.Object) *fakeAPI {
	f := &fakeAPI{t: t, cs: fake.NewClientset(objs...), open: true}
	f.cond = sync.NewCond(&f.mu)
	f.cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, apiwatch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		inner, err := f.cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		f.mu.Lock()
		f.watches++
		f.mu.Unlock()
		return true, f.gated(inner), nil
	})
	return f
}

// gated forwards events of inner only while the gate is open, in order.
func (f *fakeAPI) gated(inner apiwatch.Interface) apiwatch.Interface {
	out := make(chan apiwatch.Event)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(out)
		for ev := range inner.ResultChan() {
			f.mu.Lock()
			for !f.open {
				f.cond.Wait()
			}
			f.mu.Unlock()
			select {
			case out <- ev:
			case <-stop:
				return
			}
		}
	}()
	return &gatedWatch{out: out, stop: func() { once.Do(func() { close(stop); inner.Stop() }) }}
}

type gatedWatch struct {
	out  chan apiwatch.Event
	stop func()
}

func (g *gatedWatch) Stop()                             { g.stop() }
func (g *gatedWatch) ResultChan() <-chan apiwatch.Event { return g.out }

// setGate opens or closes delivery to the agent.
func (f *fakeAPI) setGate(open bool) {
	f.mu.Lock()
	f.open = open
	f.cond.Broadcast()
	f.mu.Unlock()
}

// waitWatches waits until the watcher's five informers watch the API, so no
// change made afterwards can fall between their list and their watch.
func (f *fakeAPI) waitWatches(w *informer.Watcher) {
	f.t.Helper()
	wait.For(f.t, 30*time.Second, "informers synced and watching", func() bool {
		f.mu.Lock()
		n := f.watches
		f.mu.Unlock()
		ok, _ := w.Synced()
		return ok && n >= 5
	})
}

func (f *fakeAPI) updateSlice(s *discoveryv1.EndpointSlice) {
	f.t.Helper()
	_, err := f.cs.DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeAPI) renewLease(at time.Time) {
	f.t.Helper()
	l := lease(at)
	_, err := f.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(context.Background(), l, metav1.UpdateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
}

// The cluster objects: one ClusterIP service with one port and one slice.
func testService(ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSvc},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

// testSlice is the service's slice with ready endpoints ips (port 8080) and
// the trigger-time annotation the EndpointSlice controller sets.
func testSlice(trigger time.Time, ips ...string) *discoveryv1.EndpointSlice {
	name, proto, port := "http", corev1.ProtocolTCP, int32(8080)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSvc + "-abcde",
			Labels:      map[string]string{discoveryv1.LabelServiceName: testSvc},
			Annotations: map[string]string{watch.TriggerTimeAnnotation: trigger.UTC().Format(time.RFC3339)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for _, ip := range ips {
		ready, node := true, nodeName
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

func testNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
}

func lease(renew time.Time) *coordinationv1.Lease {
	holder, secs := nodeName, int32(40)
	rt := metav1.NewMicroTime(renew)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: nodeName},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &rt},
	}
}
