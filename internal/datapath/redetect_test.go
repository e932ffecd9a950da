package datapath

import (
	"context"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

func TestRedetectRetriesOnInterval(t *testing.T) {
	now := time.Unix(1000, 0)
	calls := 0
	r := NewRedetect("", time.Hour, func() time.Time { return now }, "first")
	r.Detect = func(context.Context, string) (string, string, error) {
		calls++
		return model.ModeNone, "no KUBE-SERVICES chain and no kube-proxy table", nil
	}
	for i := 0; i < 3; i++ {
		obs, err := r.Snapshot(context.Background())
		if err != nil || obs.Datapath != model.ModeNone || len(obs.Warnings) != 1 || obs.Warnings[0] != "first" {
			t.Fatalf("snapshot %d: %+v %v", i, obs, err)
		}
	}
	if calls != 0 || r.Name() != model.ModeNone {
		t.Fatalf("detection ran %d times within the interval (want 0), name %s", calls, r.Name())
	}
	now = now.Add(2 * time.Hour)
	r.Detect = func(context.Context, string) (string, string, error) { calls++; return "bogus", "", nil }
	if obs, _ := r.Snapshot(context.Background()); obs.Datapath != model.ModeNone || calls != 1 {
		t.Fatalf("an unknown mode must leave the source at none: %+v calls %d", obs, calls)
	}
	if obs, _ := r.Snapshot(context.Background()); len(obs.Warnings) != 1 || obs.Warnings[0] == "first" {
		t.Fatalf("the failed detection's reason must be reported: %+v", obs)
	}
}
