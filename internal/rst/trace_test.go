package rst

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseIPList(t *testing.T) {
	got, err := ParseIPList("10.0.0.1,fd00::1,,::ffff:10.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1"), netip.MustParseAddr("10.0.0.2")}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("item %d: %s, want %s", i, got[i], want[i])
		}
	}
	for in, msg := range map[string]string{"": "no addresses", "10.0.0.1,nope": `item 2 "nope"`, ",,": "no addresses"} {
		if _, err := ParseIPList(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: err %v, want %q", in, err, msg)
		}
	}
}

// TestNewTraceResult: every requested address appears, with 0 when
// nothing was counted; a duration is in seconds to the millisecond.
func TestNewTraceResult(t *testing.T) {
	ips := []netip.Addr{netip.MustParseAddr("10.244.1.7"), netip.MustParseAddr("fd00:10:244::7"), netip.MustParseAddr("10.244.1.8")}
	counts := map[netip.Addr]Counts{ips[0]: {SentBy: 12, SentTo: 1}, ips[1]: {SentBy: 3}}
	r := NewTraceResult(ModeTracepoint, 30*time.Second+400*time.Microsecond, ips, counts)
	want := TraceResult{Mode: ModeTracepoint, DurationSeconds: 30,
		Counts: map[string]uint64{"10.244.1.7": 13, "fd00:10:244::7": 3, "10.244.1.8": 0},
		SentBy: map[string]uint64{"10.244.1.7": 12, "fd00:10:244::7": 3, "10.244.1.8": 0},
		SentTo: map[string]uint64{"10.244.1.7": 1, "fd00:10:244::7": 0, "10.244.1.8": 0}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}

func TestTraceBadOptions(t *testing.T) {
	if _, err := Trace(t.Context(), TraceOptions{Duration: time.Second}); err == nil || !strings.Contains(err.Error(), "no --ip") {
		t.Errorf("no ips: %v", err)
	}
	opts := TraceOptions{IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	if _, err := Trace(t.Context(), opts); err == nil || !strings.Contains(err.Error(), "--duration") {
		t.Errorf("no duration: %v", err)
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": "", "auto": "", "tracepoint": ModeTracepoint, "tp_btf": ModeBTF, "fentry": ModeFentry} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("kprobe"); err == nil || !strings.Contains(err.Error(), `"kprobe"`) {
		t.Errorf("ParseMode(kprobe): %v", err)
	}
}
