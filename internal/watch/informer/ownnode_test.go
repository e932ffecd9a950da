package informer

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/netdrift/netdrift/internal/watch"
)

// nodeRequests starts a Watcher on a fake client holding two Nodes and
// returns the field selectors of its Node LIST and WATCH requests and the
// Nodes its state holds once synced.
func nodeRequests(t *testing.T, opts ...Option) (selectors []string, st *watch.ClusterState) {
	t.Helper()
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}})
	var mu sync.Mutex
	record := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if r, ok := a.(interface {
			GetListRestrictions() k8stesting.ListRestrictions
		}); ok {
			mu.Lock()
			selectors = append(selectors, a.GetVerb()+" "+r.GetListRestrictions().Fields.String())
			mu.Unlock()
		}
		return false, nil, nil
	}
	client.PrependReactor("list", "nodes", record)
	client.PrependWatchReactor("nodes", func(a k8stesting.Action) (bool, apiwatch.Interface, error) {
		if r, ok := a.(k8stesting.WatchAction); ok {
			mu.Lock()
			selectors = append(selectors, "watch "+r.GetWatchRestrictions().Fields.String())
			mu.Unlock()
		}
		return false, nil, nil
	})
	w := NewWatcher(client, "node-1", clock.RealClock{}, func(watch.Event) {}, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Start(ctx)
	watching := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range selectors {
			if strings.HasPrefix(s, "watch ") {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for ok, _ := w.Synced(); !ok || !watching(); ok, _ = w.Synced() {
		if time.Now().After(deadline) {
			t.Fatal("caches did not sync, or no Node watch, in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), selectors...), w.State()
}

// TestOwnNodeOnlyAsksForOneNode: with OwnNodeOnly the Node list and watch
// carry a field selector on this node's name (the API server sends nothing
// else), and the state says it holds only this node; by default they ask
// for every Node.
func TestOwnNodeOnlyAsksForOneNode(t *testing.T) {
	sel, st := nodeRequests(t, OwnNodeOnly())
	if len(sel) < 2 {
		t.Fatalf("node requests %q, want a list and a watch", sel)
	}
	for _, s := range sel {
		if s != "list metadata.name=node-1" && s != "watch metadata.name=node-1" {
			t.Errorf("node request %q, want the field selector metadata.name=node-1", s)
		}
	}
	if !st.OwnNodeOnly {
		t.Error("state does not say it holds only the own Node")
	}

	sel, st = nodeRequests(t)
	for _, s := range sel {
		if s != "list " && s != "watch " {
			t.Errorf("default node request %q, want no field selector", s)
		}
	}
	if st.OwnNodeOnly || len(st.Nodes) != 2 {
		t.Errorf("default state: OwnNodeOnly %v, %d nodes, want false and 2", st.OwnNodeOnly, len(st.Nodes))
	}
}
