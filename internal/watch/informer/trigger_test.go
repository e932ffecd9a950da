package informer

import (
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/netdrift/netdrift/internal/watch"
)

// TestTriggerTimeOnlyForChanges: a slice's trigger time is delivered with a
// write made now (an add after the initial list, an update to a new
// resource version), and not with the initial list, a re-delivery of an
// unchanged object (a relist or resync) or a deletion, whose trigger times
// date changes made long before.
func TestTriggerTimeOnlyForChanges(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	trigger := now.Add(-72 * time.Hour)
	var got []watch.Event
	w := &Watcher{clock: clocktesting.NewFakeClock(now), onEvent: func(ev watch.Event) { got = append(got, ev) }}
	slice := func(rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", ResourceVersion: rv,
			Labels:      map[string]string{discoveryv1.LabelServiceName: "web"},
			Annotations: map[string]string{watch.TriggerTimeAnnotation: trigger.Format(time.RFC3339)}}}
	}
	h := w.handler(watch.KindEndpointSlice)
	h.OnAdd(slice("1"), true)
	h.OnAdd(slice("2"), false)
	h.OnUpdate(slice("2"), slice("2"))
	h.OnUpdate(slice("2"), slice("3"))
	h.OnDelete(slice("3"))
	h.OnUpdate(slice(""), slice(""))                      // no resource version (a fake client): taken as written
	want := []bool{false, true, false, true, false, true} // has the trigger time
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, ev := range got {
		if has := !ev.TriggerTime.IsZero(); has != want[i] || (has && !ev.TriggerTime.Equal(trigger)) {
			t.Errorf("delivery %d: trigger time %v, want it set: %v", i, ev.TriggerTime, want[i])
		}
		if ev.Service.Name != "web" {
			t.Errorf("delivery %d: service %v", i, ev.Service)
		}
	}
}
