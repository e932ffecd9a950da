package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// rfc3339UTC is a time as the wide columns print it.
var rfc3339UTC = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\b`)

// TestRenderersWideGolden: -o wide (the renderers with wide set) over the
// real handler's answers for the fixed state: nothing is cut and the
// times are RFC 3339 in UTC.
func TestRenderersWideGolden(t *testing.T) {
	client := api.NewClient(fixedAgent(t))
	get := func(path string, v any) {
		t.Helper()
		if err := client.Get(context.Background(), path, v); err != nil {
			t.Fatal(err)
		}
	}
	var status api.Status
	var drift api.Drift
	var web api.ServiceView
	var lag api.Lag
	var rsts api.RSTReport
	get("/v1/status", &status)
	get("/v1/drift", &drift)
	get("/v1/services/shop/web", &web)
	get("/v1/lag", &lag)
	get("/v1/rsts", &rsts)
	for _, c := range []struct {
		golden string
		render func(*bytes.Buffer)
		times  int // at least this many RFC 3339 times
	}{
		{"status.wide.txt.golden", func(b *bytes.Buffer) { printStatus(b, status, true) }, 3},
		{"drift.wide.txt.golden", func(b *bytes.Buffer) { printDrift(b, drift, true) }, 2},
		{"explain-web.wide.txt.golden", func(b *bytes.Buffer) { printExplain(b, web, true) }, 3},
		{"lag.wide.txt.golden", func(b *bytes.Buffer) { printLag(b, lag, true) }, 4 * 3},
		{"rsts.wide.txt.golden", func(b *bytes.Buffer) { printRSTs(b, rsts, true) }, 2},
	} {
		t.Run(c.golden, func(t *testing.T) {
			var b bytes.Buffer
			c.render(&b)
			out := b.String()
			if strings.Contains(out, "…") {
				t.Errorf("wide output cuts something:\n%s", out)
			}
			if n := len(rfc3339UTC.FindAllString(out, -1)); n < c.times {
				t.Errorf("%d RFC 3339 UTC times, want at least %d:\n%s", n, c.times, out)
			}
			golden.Check(t, filepath.Join("testdata", c.golden), b.Bytes())
		})
	}
	var narrow bytes.Buffer
	printExplain(&narrow, web, false)
	if !strings.Contains(narrow.String(), "…") || !strings.Contains(narrow.String(), cutNote) {
		t.Errorf("the narrow explain cuts a reason and must say so:\n%s", narrow.String())
	}
}

// TestSnapshotBackendsCount: a backend list too long for its column shows
// its first backends and how many more; the note under the table counts
// all left out; wide shows every backend.
func TestSnapshotBackendsCount(t *testing.T) {
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("10.244.%d.%d:8080", i/4, i+10))
	}
	rep := api.SnapshotReport{Datapath: "iptables", Frontends: []api.SnapshotFrontend{
		{Frontend: "10.96.0.10:80", FrontendKind: "cluster_ip", Protocol: "TCP", Service: "shop/web", Port: "http", Action: "forward", Backends: many},
		{Frontend: "10.96.0.20:80", FrontendKind: "cluster_ip", Protocol: "TCP", Service: "shop/cart", Port: "http", Action: "forward", Backends: many[:2]},
	}}
	var b bytes.Buffer
	printSnapshot(&b, rep, false)
	out := b.String()
	shown := strings.Count(out, ":8080")
	if shown < 2+1 || shown >= 2+12 {
		t.Fatalf("%d backends shown, want the 2 of the short list and some of the long one:\n%s", shown, out)
	}
	more := 12 - (shown - 2)
	if !strings.Contains(out, fmt.Sprintf(",… (+%d more)", more)) ||
		!strings.Contains(out, fmt.Sprintf("… (+%d more backends; -o wide or -o json shows all)", more)) {
		t.Errorf("no count of the %d backends left out:\n%s", more, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "10.96.0.10:80") && len([]rune(l)) > maxColumns+30 {
			t.Errorf("row %d columns wide: %q", len([]rune(l)), l)
		}
	}
	b.Reset()
	printSnapshot(&b, rep, true)
	if out := b.String(); strings.Count(out, ":8080") != 14 || strings.Contains(out, "more") || strings.Contains(out, "…") {
		t.Errorf("wide must show all 14 backends, uncut:\n%s", out)
	}
}

// TestLatestRowsCount: lag and rsts show the latest 20 samples and events
// with a count of the earlier ones; wide shows all.
func TestLatestRowsCount(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	var lag api.Lag
	for i := range 25 {
		at := t0.Add(time.Duration(i) * time.Second)
		lag.Samples = append(lag.Samples, api.LagSample{Service: fmt.Sprintf("shop/s%02d", i), Change: "add", T1: at, T2: at.Add(time.Second), NodeLagSeconds: 1})
	}
	var rsts api.RSTReport
	for i := range 23 {
		rsts.Events = append(rsts.Events, api.RSTEvent{Time: t0.Add(time.Duration(i) * time.Second), Direction: "sent_by_watched",
			Namespace: "shop", Pod: fmt.Sprintf("p%02d", i), Client: "10.0.0.1:1"})
	}
	for _, c := range []struct {
		name       string
		render     func(*bytes.Buffer, bool)
		row        string
		all, shown int
		note       string
	}{
		{"lag", func(b *bytes.Buffer, wide bool) { printLag(b, lag, wide) }, "shop/s", 25, 20, "… (+5 earlier samples; -o wide or -o json shows all)"},
		{"rsts", func(b *bytes.Buffer, wide bool) { printRSTs(b, rsts, wide) }, "shop/p", 23, 20, "… (+3 earlier events; -o wide or -o json shows all)"},
	} {
		var b bytes.Buffer
		c.render(&b, false)
		if n := strings.Count(b.String(), c.row); n != c.shown || !strings.Contains(b.String(), c.note) {
			t.Errorf("%s: %d rows, want %d and %q:\n%s", c.name, n, c.shown, c.note, b.String())
		}
		if !strings.Contains(b.String(), fmt.Sprintf("%s%02d", c.row, c.all-1)) {
			t.Errorf("%s: the latest row is not shown:\n%s", c.name, b.String())
		}
		b.Reset()
		c.render(&b, true)
		if n := strings.Count(b.String(), c.row); n != c.all || strings.Contains(b.String(), "earlier") {
			t.Errorf("%s wide: %d rows, want all %d:\n%s", c.name, n, c.all, b.String())
		}
	}
}
