// Package informer runs the agent's Kubernetes informers (client-go) and
// turns their deliveries into watch.Events. Kept apart from package watch so
// that the pure desired-state code builds (and fuzzes) without client-go.
package informer

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/watch"

	"github.com/netdrift/netdrift/internal/model"
)

// Watcher runs the informers the agent needs and exposes typed, read-only
// views of their caches. Handlers receive Events; nothing should be reported
// until Synced() is true.
type Watcher struct {
	node    string
	clock   clock.PassiveClock
	onEvent func(watch.Event)

	shared  informers.SharedInformerFactory
	nodes   informers.SharedInformerFactory
	pods    informers.SharedInformerFactory
	leases  informers.SharedInformerFactory
	ownNode bool
	synced  map[string]cache.InformerSynced
	sliceIx cache.Indexer
	svcIx   cache.Indexer
	nodeIx  cache.Indexer
	podIx   cache.Indexer
}

const byService = "service"

// Option changes what a Watcher watches.
type Option func(*Watcher)

// OwnNodeOnly watches only node's own Node object, as kube-proxy does,
// instead of every Node: the API server then sends this agent one Node's
// updates instead of the whole cluster's, and the node rules that need every
// Node (routes to other nodes' podCIDRs, endpoints on missing nodes) are
// skipped (watch.ClusterState.OwnNodeOnly).
func OwnNodeOnly() Option { return func(w *Watcher) { w.ownNode = true } }

// NewWatcher prepares informers on Services, EndpointSlices, Nodes (every
// Node, or node's own with OwnNodeOnly), the Pods of node and node's Lease.
// onEvent is called from informer goroutines and must not block.
func NewWatcher(client kubernetes.Interface, node string, clk clock.PassiveClock, onEvent func(watch.Event), opts ...Option) *Watcher {
	w := &Watcher{node: node, clock: clk, onEvent: onEvent, synced: map[string]cache.InformerSynced{}}
	for _, o := range opts {
		o(w)
	}
	w.shared = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim))
	w.pods = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim),
		informers.WithTweakListOptions(fieldIs("spec.nodeName", node)))
	w.leases = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim),
		informers.WithNamespace(corev1.NamespaceNodeLease), informers.WithTweakListOptions(fieldIs("metadata.name", node)))
	w.nodes = w.shared
	if w.ownNode {
		w.nodes = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim),
			informers.WithTweakListOptions(fieldIs("metadata.name", node)))
	}

	svc := w.shared.Core().V1().Services().Informer()
	sl := w.shared.Discovery().V1().EndpointSlices().Informer()
	_ = sl.AddIndexers(cache.Indexers{byService: sliceServiceIndex})
	nodes := w.nodes.Core().V1().Nodes().Informer()
	pods := w.pods.Core().V1().Pods().Informer()
	lease := w.leases.Coordination().V1().Leases().Informer()

	w.svcIx, w.sliceIx, w.nodeIx, w.podIx = svc.GetIndexer(), sl.GetIndexer(), nodes.GetIndexer(), pods.GetIndexer()
	w.synced[watch.KindService], w.synced[watch.KindEndpointSlice] = svc.HasSynced, sl.HasSynced
	w.synced[watch.KindNode], w.synced[watch.KindPod], w.synced[watch.KindLease] = nodes.HasSynced, pods.HasSynced, lease.HasSynced

	_, _ = svc.AddEventHandler(w.handler(watch.KindService))
	_, _ = sl.AddEventHandler(w.handler(watch.KindEndpointSlice))
	_, _ = nodes.AddEventHandler(w.handler(watch.KindNode))
	_, _ = pods.AddEventHandler(w.handler(watch.KindPod))
	_, _ = lease.AddEventHandler(w.handler(watch.KindLease))
	return w
}

// fieldIs restricts a list and watch to objects whose field equals value.
func fieldIs(field, value string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.FieldSelector = fields.OneTermEqualSelector(field, value).String() }
}

func sliceServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + name}, nil
}

// Start runs the informers until ctx is done.
func (w *Watcher) Start(ctx context.Context) {
	w.shared.Start(ctx.Done())
	w.nodes.Start(ctx.Done()) // the shared factory again unless OwnNodeOnly: starting twice is a no-op
	w.pods.Start(ctx.Done())
	w.leases.Start(ctx.Done())
}

// Synced reports whether every cache has synced, and if not, which have not.
func (w *Watcher) Synced() (bool, string) {
	var missing []string
	for k, f := range w.synced {
		if !f() {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		return false, "waiting for caches to sync: " + strings.Join(missing, ", ")
	}
	return true, ""
}

// handler delivers each informer notification. Only an add or update made
// now carries its slice's trigger time: the initial list, a relist's or
// resync's re-delivery of an object whose resource version did not change,
// and a deletion (the annotation dates the slice's last update, not its
// removal) carry trigger times of changes made long before (days, for a
// Service nobody touched), which would be measured as watch delays.
func (w *Watcher) handler(kind string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) { w.deliver(kind, obj, false, !initial) },
		UpdateFunc: func(old, obj any) {
			rv := resourceVersion(obj)
			w.deliver(kind, obj, false, rv == "" || rv != resourceVersion(old)) // "": not known (fake clients)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			w.deliver(kind, obj, true, false)
		},
	}
}

func resourceVersion(obj any) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetResourceVersion()
	}
	return ""
}

// PodIPs are a pod's addresses (IPv4-mapped IPv6 unmapped; bad ones skipped).
func PodIPs(p *corev1.Pod) []netip.Addr {
	var ips []netip.Addr
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			ips = append(ips, a.Unmap())
		}
	}
	return ips
}

// DeletionRequested is when the pod's deletion was requested: the API
// server sets deletionTimestamp to that time plus the grace period (second
// precision). Zero while the pod is not being deleted.
func DeletionRequested(p *corev1.Pod) time.Time {
	if p.DeletionTimestamp == nil {
		return time.Time{}
	}
	t := p.DeletionTimestamp.Time
	if g := p.DeletionGracePeriodSeconds; g != nil {
		t = t.Add(-time.Duration(*g) * time.Second)
	}
	return t
}

// podDeletion: a pod's IPs and deletion request time; a deletion delivered
// without a deletionTimestamp is dated by its delivery.
func podDeletion(p *corev1.Pod, deleted bool, at time.Time) ([]netip.Addr, time.Time) {
	t := DeletionRequested(p)
	if t.IsZero() && deleted {
		t = at
	}
	return PodIPs(p), t
}

// deliver hands one notification to onEvent; written: the object was
// written now (not the initial list's, a re-delivery or a deletion), so a
// slice's trigger time dates this delivery's change.
func (w *Watcher) deliver(kind string, obj any, deleted, written bool) {
	ev := watch.Event{Kind: kind, Deleted: deleted, At: w.clock.Now()}
	switch o := obj.(type) {
	case *corev1.Service:
		ev.Name, ev.Service = o.Namespace+"/"+o.Name, model.ServiceName{Namespace: o.Namespace, Name: o.Name}
	case *discoveryv1.EndpointSlice:
		ev.Name = o.Namespace + "/" + o.Name
		if n := o.Labels[discoveryv1.LabelServiceName]; n != "" {
			ev.Service = model.ServiceName{Namespace: o.Namespace, Name: n}
		}
		if ts, err := time.Parse(time.RFC3339, o.Annotations[watch.TriggerTimeAnnotation]); err == nil && written {
			ev.TriggerTime = ts
		}
	case *corev1.Node:
		ev.Name = o.Name
	case *corev1.Pod:
		ev.Name = o.Namespace + "/" + o.Name
		ev.PodIPs, ev.DeletionRequested = podDeletion(o, deleted, ev.At)
		ev.PodHostNetwork = o.Spec.HostNetwork
	case *coordinationv1.Lease:
		ev.Name = o.Namespace + "/" + o.Name
		if o.Spec.RenewTime != nil {
			ev.LeaseRenew = o.Spec.RenewTime.Time
		}
	default:
		return
	}
	if w.onEvent != nil {
		w.onEvent(ev)
	}
}

// Service returns a cached service, or nil.
func (w *Watcher) Service(key model.ServiceName) *corev1.Service {
	obj, ok, _ := w.svcIx.GetByKey(key.String())
	if !ok {
		return nil
	}
	return obj.(*corev1.Service)
}

// SlicesFor returns the cached EndpointSlices of a service, sorted by name.
func (w *Watcher) SlicesFor(service model.ServiceName) []*discoveryv1.EndpointSlice {
	objs, _ := w.sliceIx.ByIndex(byService, service.String())
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*discoveryv1.EndpointSlice))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Node returns a cached node, or nil.
func (w *Watcher) Node(name string) *corev1.Node {
	obj, ok, _ := w.nodeIx.GetByKey(name)
	if !ok {
		return nil
	}
	return obj.(*corev1.Node)
}

// ServiceKeys lists every cached service, sorted by namespace/name (the
// cache's keys).
func (w *Watcher) ServiceKeys() []model.ServiceName {
	keys := w.svcIx.ListKeys()
	sort.Strings(keys)
	out := make([]model.ServiceName, 0, len(keys))
	for _, k := range keys {
		if sn, ok := model.ParseServiceName(k); ok {
			out = append(out, sn)
		}
	}
	return out
}

// State returns the whole cache as a watch.ClusterState (shared pointers: read only).
func (w *Watcher) State() *watch.ClusterState {
	return &watch.ClusterState{
		Services:       listAs[*corev1.Service](w.svcIx.List()),
		EndpointSlices: listAs[*discoveryv1.EndpointSlice](w.sliceIx.List()),
		Nodes:          listAs[*corev1.Node](w.nodeIx.List()),
		Pods:           listAs[*corev1.Pod](w.podIx.List()),
		OwnNodeOnly:    w.ownNode,
	}
}

// listAs converts an indexer's list, sized once (nil when empty, as the
// appends left it).
func listAs[T any](objs []any) []T {
	if len(objs) == 0 {
		return nil
	}
	out := make([]T, len(objs))
	for i, o := range objs {
		out[i] = o.(T)
	}
	return out
}

// String describes the watcher for logs.
func (w *Watcher) String() string { return fmt.Sprintf("watcher(node=%s)", w.node) }

// Pods returns the cached pods of this node.
func (w *Watcher) Pods() []*corev1.Pod {
	objs := w.podIx.List()
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}
