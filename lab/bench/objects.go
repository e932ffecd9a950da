package bench

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Namespace holds every object the benchmark writes.
const Namespace = "bench"

// TriggerTimeAnnotation is what kube-proxy and netdrift read T0 from.
const TriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// Endpoint addresses come from 10.128.0.0/9 (outside the lab's service,
// bridge and pod ranges): address n is 10.(128+n>>16).(n>>8).(n). kube-proxy
// programs endpoints wherever they are; no pod runs behind them.
func endpointAddr(n int) string {
	if n < 0 || n >= 127<<16 {
		panic(fmt.Sprintf("endpoint index %d out of range", n))
	}
	return netip.AddrFrom4([4]byte{10, byte(128 + n>>16), byte(n >> 8), byte(n)}).String()
}

// ServiceName is the name of service i.
func ServiceName(i int) string { return fmt.Sprintf("s%05d", i) }

// BuildService is service i: ClusterIP, TCP port 80 -> 8080, no selector
// (the EndpointSlice controller leaves its slice alone).
func BuildService(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ServiceName(i)},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// BuildSlice is service i's EndpointSlice with eps ready endpoints at
// addresses first..first+eps-1, its trigger time set to at.
func BuildSlice(i, eps, first int, at time.Time) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ServiceName(i) + "-1",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: ServiceName(i),
				discoveryv1.LabelManagedBy:   "bench.netdrift.io",
			},
			Annotations: map[string]string{TriggerTimeAnnotation: at.UTC().Format(time.RFC3339Nano)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP),
			Port: ptr.To[int32](8080)}},
	}
	for j := 0; j < eps; j++ {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{endpointAddr(first + j)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
	}
	return s
}

// Cluster is the benchmark's objects as written (the slices with their
// latest resourceVersion, for the churn's updates).
type Cluster struct {
	Services, EndpointsPerService int
	Slices                        []*discoveryv1.EndpointSlice
	ClusterIPs                    []string
	nextAddr                      int
}

// CreateCluster creates the namespace, services services and one slice
// each with eps endpoints, with workers parallel writers. The client's QPS
// limit should be high (the API server's cost is not measured).
func CreateCluster(ctx context.Context, cs kubernetes.Interface, services, eps, workers int) (*Cluster, error) {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	c := &Cluster{Services: services, EndpointsPerService: eps, Slices: make([]*discoveryv1.EndpointSlice, services),
		ClusterIPs: make([]string, services), nextAddr: services * eps}
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= services || ctx.Err() != nil {
					return
				}
				ip, s, err := createOne(ctx, cs, i, eps)
				if err != nil {
					errc <- fmt.Errorf("service %d: %w", i, err)
					cancel()
					return
				}
				c.Slices[i], c.ClusterIPs[i] = s, ip
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	return c, nil
}

func createOne(ctx context.Context, cs kubernetes.Interface, i, eps int) (string, *discoveryv1.EndpointSlice, error) {
	var err error
	var svc *corev1.Service
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		svc, err = cs.CoreV1().Services(Namespace).Create(ctx, BuildService(i), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			svc, err = cs.CoreV1().Services(Namespace).Get(ctx, ServiceName(i), metav1.GetOptions{})
		}
		if err == nil {
			break
		}
	}
	if err != nil {
		return "", nil, err
	}
	ip := svc.Spec.ClusterIP
	var s *discoveryv1.EndpointSlice
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		s, err = cs.DiscoveryV1().EndpointSlices(Namespace).Create(ctx, BuildSlice(i, eps, i*eps, time.Now()), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			s, err = cs.DiscoveryV1().EndpointSlices(Namespace).Get(ctx, ServiceName(i)+"-1", metav1.GetOptions{})
		}
		if err == nil {
			return ip, s, nil
		}
	}
	return "", nil, err
}

// Change is one churn step as made.
type Change struct {
	Service string // namespace/name
	At      time.Time
	Err     error
}

// ChangeOne replaces one endpoint address of service i's slice with a new
// one and sets its trigger time to now; the slice's resourceVersion is kept
// for the next update.
func (c *Cluster) ChangeOne(ctx context.Context, cs kubernetes.Interface, i int) Change {
	s := c.Slices[i].DeepCopy()
	j := c.nextAddr % len(s.Endpoints)
	s.Endpoints[j].Addresses = []string{endpointAddr(c.nextAddr)}
	c.nextAddr++
	now := time.Now()
	s.Annotations[TriggerTimeAnnotation] = now.UTC().Format(time.RFC3339Nano)
	out, err := cs.DiscoveryV1().EndpointSlices(Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if err == nil {
		c.Slices[i] = out
	}
	return Change{Service: Namespace + "/" + ServiceName(i), At: now, Err: err}
}

// Churn makes rate changes per second for d, one service after the other
// (round robin from *cursor, so a service changes again only after every
// other one did), and returns the changes made. A change that cannot be
// made on time is made late, not skipped; the count made is what is
// compared with the samples.
func (c *Cluster) Churn(ctx context.Context, cs kubernetes.Interface, rate float64, d time.Duration, cursor *int) []Change {
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	n := int(rate * d.Seconds())
	out := make([]Change, 0, n)
	for k := 0; k < n && ctx.Err() == nil; k++ {
		if wait := time.Until(start.Add(time.Duration(k) * interval)); wait > 0 {
			select {
			case <-ctx.Done():
				return out
			case <-time.After(wait):
			}
		}
		out = append(out, c.ChangeOne(ctx, cs, *cursor%c.Services))
		*cursor++
	}
	return out
}
