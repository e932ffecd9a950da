package agent

import (
	"context"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// fakeCluster is an in-memory Cluster for pure tests of the loop.
type fakeCluster struct {
	mu       sync.Mutex
	synced   bool
	services map[string]*corev1.Service
	slices   map[string][]*discoveryv1.EndpointSlice
	nodes    map[string]*corev1.Node
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{synced: true, services: map[string]*corev1.Service{},
		slices: map[string][]*discoveryv1.EndpointSlice{}, nodes: map[string]*corev1.Node{}}
}

func (c *fakeCluster) Synced() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return false, "waiting for caches to sync: endpointslice"
	}
	return true, ""
}

func (c *fakeCluster) Service(k model.ServiceName) *corev1.Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.services[k.String()]
}

func (c *fakeCluster) SlicesFor(k model.ServiceName) []*discoveryv1.EndpointSlice {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slices[k.String()]
}

func (c *fakeCluster) Node(n string) *corev1.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[n]
}

func (c *fakeCluster) ServiceKeys() []model.ServiceName {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []model.ServiceName
	for k := range c.services {
		sn, _ := model.ParseServiceName(k)
		out = append(out, sn)
	}
	return out
}

func (c *fakeCluster) State() *watch.ClusterState {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := &watch.ClusterState{}
	for _, s := range c.services {
		cs.Services = append(cs.Services, s)
	}
	for _, ss := range c.slices {
		cs.EndpointSlices = append(cs.EndpointSlices, ss...)
	}
	return cs
}

// fakeSource returns whatever the test sets.
type fakeSource struct {
	mu      sync.Mutex
	obs     model.Observed
	err     error
	n       int
	resyncs int
	audits  [3]uint64 // what SelfAudits reports
	// auditable: RequestAudit is counted in auditReqs; else it resyncs (a
	// reader without audits, as datapath.Redetect forwards it)
	auditable bool
	auditReqs int
}

func (f *fakeSource) RequestAudit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.auditable {
		f.auditReqs++
	} else {
		f.resyncs++
	}
}

func (f *fakeSource) SelfAudits() (uint64, uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.audits[0], f.audits[1], f.audits[2]
}

func (f *fakeSource) Name() string { return model.ModeIPTables }

func (f *fakeSource) SetHints(model.Hints)                                    {}
func (f *fakeSource) ApplyChange(context.Context, datapath.ChangeEvent) error { return nil }
func (f *fakeSource) LastReadCPU() time.Duration                              { return 0 }

func (f *fakeSource) Evented() bool { return false }

func (f *fakeSource) Resync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resyncs++
}

func (f *fakeSource) Snapshot(context.Context) (model.Observed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.obs, f.err
}

func (f *fakeSource) set(obs model.Observed, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.obs, f.err = obs, err
}

// Frozen copies the current observation (the fake does not change its map
// in place unless a test does, through inPlace).
func (f *fakeSource) Frozen() (model.Observed, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.obs
	o.Frontends = maps.Clone(o.Frontends)
	return o, true
}

// inPlace changes the current observation's frontends in place, as the
// nftables reader does on an endpoint change.
func (f *fakeSource) inPlace(change func(map[model.Frontend]model.Verdict)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.obs.Frontends)
}
