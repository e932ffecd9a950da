package bench

import (
	"strings"
	"testing"
	"time"
)

// A --frontends listing as cilium-dbg v1.20.2 prints it: master entries
// only, "backend-id count[qcount] (rev-nat) [flags]".
const frontendsListing = `{
  "10.96.0.1:443/TCP (0)": ["0 1[0] (1) [ClusterIP, non-routable]"],
  "10.96.0.10:80/TCP (0)": ["0 10[2] (2) [ClusterIP, non-routable]"],
  "10.96.0.11:80/TCP (0)": ["0 3[0] (3) [ClusterIP, non-routable]"],
  "10.96.0.12:53/UDP (0)": ["0 2[0] (4) [ClusterIP, non-routable]"],
  "10.96.0.10:0/ANY (0)": ["0 0[0] (2) [ClusterIP, non-routable]"]
}`

func TestParseFrontendCounts(t *testing.T) {
	got, err := parseFrontendCounts([]byte(frontendsListing))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"10.96.0.1:443": 1, "10.96.0.10:80": 10, "10.96.0.11:80": 3}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: count %d, want %d", k, got[k], v)
		}
	}
	n, ex := shortFrontends(got, []string{"10.96.0.10", "10.96.0.11", "10.96.0.99"}, 80, 10)
	if n != 2 || ex != "10.96.0.11:80: 3" {
		t.Errorf("short %d (%q), want 2 (10.96.0.11:80: 3)", n, ex)
	}
	if n, _ := shortFrontends(got, []string{"10.96.0.10"}, 80, 10); n != 0 {
		t.Errorf("a frontend with its 10 selectable slots counted short")
	}
}

func TestParseFrontendCountsRefuses(t *testing.T) {
	for _, in := range []string{`not json`, `{"10.96.0.10:80/TCP (0)": ["0"]}`, `{"10.96.0.10:80/TCP (0)": ["0 x[0] (2)"]}`} {
		if _, err := parseFrontendCounts([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestUnexpectedWarning(t *testing.T) {
	flag, allowed := diffInput("cilium")
	if flag != "--cilium-lb" || allowed == "" {
		t.Fatalf("cilium: %s, %q", flag, allowed)
	}
	gap := "warning: " + lbListGap + " (terminating or quarantined backends kept for draining): every slot is read as a backend\n"
	if w := unexpectedWarning("no finding\n"+gap, allowed); w != "" {
		t.Errorf("the listing's known gap refused: %q", w)
	}
	other := "warning: 3 host-port entries not compared"
	if w := unexpectedWarning(gap+other+"\n", allowed); w != other {
		t.Errorf("another warning: got %q, want %q", w, other)
	}
	if _, allowed := diffInput("nftables"); unexpectedWarning(gap, allowed) == "" {
		t.Error("nftables mode accepted a warning")
	}
}

func TestCiliumLagTable(t *testing.T) {
	w := Window{Name: "churn 1/s", Rate: 1, Changes: 3, Samples: 3, SamplesMetric: 3, T2Sources: map[string]int{"map-write-stamp": 2, "": 1},
		AgentT2T0: []time.Duration{600 * time.Millisecond, 700 * time.Millisecond, 900 * time.Millisecond}, AgentT2T0Mean: 733 * time.Millisecond}
	empty := Window{Name: "churn 20/s", Rate: 20}
	var b strings.Builder
	writeCiliumLag(&b, []Window{w, empty})
	out := b.String()
	for _, s := range []string{"700.0 ms", "900.0 ms", "733.0 ms", "n/a (no reference)", "map-write-stamp 2, read 1"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, " 0.0 ms") {
		t.Errorf("a window with no T2-T0 shows a figure, not n/a:\n%s", out)
	}
}
