package main

import (
	"context"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

func TestRedetectSourceRetriesOnInterval(t *testing.T) {
	calls := 0
	r := &redetectSource{interval: time.Hour, detect: func(context.Context, string) (string, string, error) {
		calls++
		return model.ModeNone, "no KUBE-SERVICES chain and no kube-proxy table", nil
	}}
	for i := 0; i < 3; i++ {
		obs, err := r.Snapshot(context.Background())
		if err != nil || obs.Datapath != model.ModeNone || len(obs.Warnings) != 1 || obs.Warnings[0] == "" {
			t.Fatalf("snapshot %d: %+v %v", i, obs, err)
		}
	}
	if calls != 1 || r.Name() != model.ModeNone {
		t.Fatalf("detection ran %d times within the interval (want 1), name %s", calls, r.Name())
	}
	r.last = time.Now().Add(-2 * time.Hour)
	r.detect = func(context.Context, string) (string, string, error) { calls++; return "bogus", "", nil }
	if obs, _ := r.Snapshot(context.Background()); obs.Datapath != model.ModeNone || calls != 2 {
		t.Fatalf("an unknown mode must leave the source at none: %+v calls %d", obs, calls)
	}
}
