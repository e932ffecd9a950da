package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/api"
)

// Issue 12 item 10: the kind is never cut, and long service names are
// shortened in the middle so that two services never look the same.
func TestFindingsTableKeepsKindsAndTellsNamesApart(t *testing.T) {
	long := "payments-processing-gateway-internal-"
	fs := []api.Finding{
		{Kind: "missing_frontend", Service: "team-a/" + long + "primary", Port: "https", Frontend: "10.96.0.1:443", Detail: "d1"},
		{Kind: "missing_frontend", Service: "team-a/" + long + "replica", Port: "https", Frontend: "10.96.0.2:443", Detail: "d2"},
		{Kind: "endpoint_on_missing_node", Service: "team-a/short", Subject: "node-gone", Detail: strings.Repeat("word ", 40) + "end"},
	}
	var b bytes.Buffer
	writeFindings(&b, "KIND", fs, false)
	out := b.String()
	for _, k := range []string{"missing_frontend ", "endpoint_on_missing_node "} {
		if !strings.Contains(out, k) {
			t.Errorf("kind %q cut:\n%s", k, out)
		}
	}
	var svc []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "missing_frontend" {
			svc = append(svc, f[1])
		}
	}
	if len(svc) != 2 || svc[0] == svc[1] {
		t.Fatalf("the two services must stay distinct, got %q:\n%s", svc, out)
	}
	for _, s := range svc {
		if !strings.HasPrefix(s, "team-a/") || !strings.Contains(s, "…") || !strings.HasSuffix(s, ":https") {
			t.Errorf("%q: want start and end kept, middle shortened", s)
		}
	}
	if !strings.Contains(out, "word end") && !strings.Contains(out, "    end") {
		t.Errorf("a long detail must wrap, not be cut:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > 100 {
			t.Errorf("line over 100 columns: %q", l)
		}
	}
}

func TestShortenMiddle(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"abcdef", 10, "abcdef"},
		{"abcdefghij", 5, "ab…ij"},
		{"abcdefghij", 6, "abc…ij"},
	} {
		if got := shorten(tc.in, tc.max); got != tc.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
