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

// countingReader counts Resync calls; auditingReader also RequestAudit.
type countingReader struct{ resyncs, audits int }

func (c *countingReader) Name() string { return model.ModeIPTables }
func (c *countingReader) Snapshot(context.Context) (model.Observed, error) {
	return model.Observed{}, nil
}
func (c *countingReader) SetHints(model.Hints)                           {}
func (c *countingReader) ApplyChange(context.Context, ChangeEvent) error { return nil }
func (c *countingReader) Evented() bool                                  { return false }
func (c *countingReader) LastReadCPU() time.Duration                     { return 0 }
func (c *countingReader) Resync()                                        { c.resyncs++ }

type auditingReader struct{ countingReader }

func (a *auditingReader) RequestAudit() { a.audits++ }

// TestRedetectRequestAudit: the full audit's request reaches a reader that
// audits its kept state as RequestAudit, any other as Resync, and nothing
// before a mode is known.
func TestRedetectRequestAudit(t *testing.T) {
	r := NewRedetect("", time.Hour, time.Now, "none yet")
	r.RequestAudit() // no reader: nothing to call
	plain, auditing := &countingReader{}, &auditingReader{}
	r.inner = plain
	r.RequestAudit()
	r.inner = auditing
	r.RequestAudit()
	if plain.resyncs != 1 || auditing.audits != 1 || auditing.resyncs != 0 {
		t.Fatalf("plain reader resynced %d times; auditing reader audited %d, resynced %d: want 1, 1, 0",
			plain.resyncs, auditing.audits, auditing.resyncs)
	}
}
