package watch

import (
	"net/netip"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// Event kinds delivered by the Watcher.
const (
	KindService       = "service"
	KindEndpointSlice = "endpointslice"
	KindNode          = "node"
	KindPod           = "pod"
	KindLease         = "lease"
)

// TriggerTimeAnnotation is set by the EndpointSlice controller on every slice
// change: the control-plane time of the change that triggered it (T0).
const TriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// Event is one delivery from the API server.
type Event struct {
	Kind        string
	Service     model.ServiceName // for service and endpointslice events
	Name        string            // namespace/name of the object itself
	Deleted     bool              //
	At          time.Time         // T1: when the informer delivered it (agent clock)
	TriggerTime time.Time         // T0 for endpointslices (zero when absent)
	LeaseRenew  time.Time         // renewTime for lease events
	// Pods: their IPs, and when their deletion was requested (deletionTimestamp
	// minus the grace period; the delivery time for a deletion seen without
	// one). Zero while the pod is not being deleted.
	PodIPs            []netip.Addr
	DeletionRequested time.Time
	PodHostNetwork    bool // the pod's IPs are the node's
}
