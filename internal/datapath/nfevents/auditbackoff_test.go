package nfevents

import (
	"testing"
	"time"
)

func TestAuditBackoffDoublesUpToTheMax(t *testing.T) {
	var b AuditBackoff
	now := time.Unix(1000, 0)
	if !b.Ready(now) {
		t.Fatal("a fresh backoff must allow an audit at once")
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := b.PutOff(now); got != w {
			t.Fatalf("put off #%d: wait %v, want %v", i+1, got, w)
		}
		if b.Ready(now.Add(w - time.Millisecond)) {
			t.Fatalf("put off #%d: ready before its wait of %v ended", i+1, w)
		}
		if !b.Ready(now.Add(w)) {
			t.Fatalf("put off #%d: not ready once its wait of %v ended", i+1, w)
		}
	}
	for range 100 { // the shift must never overflow into a short wait
		b.PutOff(now)
	}
	if got := b.PutOff(now); got != AuditRetryMax {
		t.Fatalf("after many put-offs: wait %v, want %v", got, AuditRetryMax)
	}
	b.Done()
	if !b.Ready(now) {
		t.Fatal("after Done an audit may run at once")
	}
	if got := b.PutOff(now); got != AuditRetryFirst {
		t.Fatalf("after Done: wait %v, want %v", got, AuditRetryFirst)
	}
}
