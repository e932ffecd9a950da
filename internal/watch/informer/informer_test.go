package informer

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodDeletionTime(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	ts := metav1.NewTime(at.Add(25 * time.Second))
	grace := int64(30)
	p := &corev1.Pod{Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00::5"}, {IP: "bogus"}}}}
	ips, when := podDeletion(p, false, at)
	if len(ips) != 2 || ips[0].String() != "10.244.1.5" || ips[1].String() != "fd00::5" || !when.IsZero() {
		t.Fatalf("running pod: %v %v; want both IPs and no deletion", ips, when)
	}
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, &grace
	if _, when = podDeletion(p, false, at); !when.Equal(at.Add(-5 * time.Second)) {
		t.Errorf("terminating pod: deletion requested %v, want deletionTimestamp - grace = %v", when, at.Add(-5*time.Second))
	}
	p.DeletionTimestamp = nil
	if _, when = podDeletion(p, true, at); !when.Equal(at) {
		t.Errorf("deleted without a deletionTimestamp: %v, want the delivery time %v", when, at)
	}
}
