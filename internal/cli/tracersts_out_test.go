package cli

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/rst"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// traceFixture is a trace of three addresses (one a Service's backend) with
// two events.
func traceFixture() (*traceOutput, *bytes.Buffer, *bytes.Buffer, rst.TraceStart, []rst.Event, rst.TraceResult) {
	ips := []netip.Addr{netip.MustParseAddr("10.244.1.7"), netip.MustParseAddr("fd00:10:244::7"), netip.MustParseAddr("10.244.1.8")}
	started := time.Date(2026, 11, 29, 14, 30, 0, 250e6, time.UTC)
	res := rst.NewTraceResult(rst.ModeBTF, 30*time.Second+400*time.Microsecond, ips,
		map[netip.Addr]rst.Counts{ips[0]: {SentBy: 12, SentTo: 1}, ips[1]: {SentBy: 3}})
	res.Started = started
	res.Events = &rst.TraceEvents{Delivered: 2, NotSampled: 14}
	evs := []rst.Event{
		{Time: started.Add(1500 * time.Millisecond), Sender: netip.MustParseAddrPort("10.244.1.7:5432"), Peer: netip.MustParseAddrPort("10.244.2.9:40312"),
			Direction: rst.SentBy, Reason: "NO_SOCKET", Source: "tracepoint"},
		{Time: started.Add(2 * time.Second), Sender: netip.MustParseAddrPort("[fd00:10:244::9]:51000"), Peer: netip.MustParseAddrPort("[fd00:10:244::7]:5432"),
			Direction: rst.SentTo, Reason: "NOT_SPECIFIED", Source: "tracepoint"},
	}
	var out, errb bytes.Buffer
	o := &traceOutput{stdout: &out, stderr: &errb, ips: ips, port: 5432, duration: 30 * time.Second,
		resolved: []vipBackends{{"10.97.0.7", "shop/db", []string{"10.244.1.7", "fd00:10:244::7"}}}}
	return o, &out, &errb, rst.TraceStart{Time: started, Mode: rst.ModeBTF}, evs, res
}

// TestTraceOutputGolden: trace-rsts' table and JSON, with and without
// --watch; the attach line on stderr names the time, the mode, the
// addresses and that counting starts now.
func TestTraceOutputGolden(t *testing.T) {
	for _, c := range []struct {
		golden      string
		json, watch bool
	}{
		{"trace.txt.golden", false, false},
		{"trace.json.golden", true, false},
		{"trace-watch.txt.golden", false, true},
		{"trace-watch.jsonl.golden", true, true},
	} {
		t.Run(c.golden, func(t *testing.T) {
			o, out, errb, st, evs, res := traceFixture()
			o.json, o.watch = c.json, c.watch
			if !c.watch {
				res.Events = nil
			}
			o.attached(st)
			if c.watch {
				for _, ev := range evs {
					o.event(ev)
				}
			}
			o.result(res)
			want := "2026-11-29T14:30:00.250Z rst probe attached (mode tp_btf): counting RSTs for 10.244.1.7, fd00:10:244::7, 10.244.1.8 " +
				"on port 5432 from now on; resets before this line are not counted. Start the reproduction now; Ctrl-C stops (else after 30s).\n"
			if errb.String() != want {
				t.Errorf("stderr %q, want %q", errb.String(), want)
			}
			if c.json && c.watch {
				lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
				kinds := []string{}
				for _, l := range lines {
					var v struct{ Kind string }
					if err := json.Unmarshal([]byte(l), &v); err != nil {
						t.Fatalf("line %q is no JSON object: %v", l, err)
					}
					kinds = append(kinds, v.Kind)
				}
				if strings.Join(kinds, ",") != "rst,rst,totals" {
					t.Errorf("JSON Lines kinds %v, want rst, rst, totals", kinds)
				}
			}
			golden.Check(t, filepath.Join("testdata", c.golden), out.Bytes())
		})
	}
}

func TestIPList(t *testing.T) {
	var ips []netip.Addr
	for i := range 8 {
		ips = append(ips, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}))
	}
	if got, want := ipList(ips, 5), "10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5 and 3 more (all in the counts)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := ipList(ips[:2], 5); got != "10.0.0.1, 10.0.0.2" {
		t.Errorf("got %q", got)
	}
}
