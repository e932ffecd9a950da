package bench

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// The figures of docs/architecture.md, "Node reports", from the model.
func TestWriteLoadModel(t *testing.T) {
	hb, mi := 2*time.Minute, time.Minute
	for _, c := range []struct {
		name     string
		changing int
		want     float64
	}{
		{"healthy (no node's key changes)", 0, 41.67},
		{"50 stale nodes (1 %)", 50, 42.08},
		{"250 stale nodes (5 %)", 250, 43.75},
		{"worst case (every node's key changes)", 5000, 83.33},
	} {
		if got := WriteLoad(5000, c.changing, hb, mi); math.Abs(got-c.want) > 0.01 {
			t.Errorf("%s: %.2f writes/s, want %.2f", c.name, got, c.want)
		}
	}
	if lease := 5000 / 10.0; WriteLoad(5000, 5000, hb, mi) > lease/5 {
		t.Errorf("the worst case exceeds a fifth of the Node Lease renewals (%v/s)", lease)
	}
}

func TestSimReport(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	var withF, without int
	for i := range 100 {
		if SimFindings(i, 0, false) > 0 {
			withF++
		} else {
			without++
		}
	}
	if withF != 5 || without != 95 {
		t.Fatalf("%d of 100 nodes with findings, want 5", withF)
	}
	b := SimReport(20, 3, 20, at)
	var m struct {
		Metadata struct{ Name string }
		Report   struct {
			FindingsTotal int
			Findings      []map[string]string
		}
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Metadata.Name != "sim-node-00020" || m.Report.FindingsTotal != 20 || len(m.Report.Findings) != 20 || m.Report.Findings[0]["since"] == "" {
		t.Fatalf("report %s", b)
	}
	if n := len(SimReport(1, 0, 0, at)); n < 300 || n > 1000 {
		t.Errorf("a report without findings is %d bytes", n)
	}
	if n := len(b); n < 2500 || n > 6000 {
		t.Errorf("a report with 20 findings is %d bytes", n)
	}
}
