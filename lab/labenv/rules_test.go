package labenv

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseBackends(t *testing.T) {
	ipt, err := os.ReadFile("../../testdata/kube-proxy-v1.37/worker-a.iptables-save") // the shared capture (see its README)
	if err != nil {
		t.Fatal(err)
	}
	nft, err := os.ReadFile("../../testdata/kube-proxy-v1.37/worker-b.nft.txt")
	if err != nil {
		t.Fatal(err)
	}
	two := []string{"10.214.1.31:8080", "10.214.2.31:8080"}
	for _, tc := range []struct {
		name string
		fn   func(string, string, int) ([]string, error)
		in   string
		ip   string
		port int
		want []string
	}{
		{"iptables two", parseIPTablesBackends, string(ipt), "10.97.38.30", 80, two},
		{"iptables wrong port", parseIPTablesBackends, string(ipt), "10.97.38.30", 81, nil},
		{"iptables unknown ip", parseIPTablesBackends, string(ipt), "10.1.1.1", 80, nil},
		{"nft two", parseNFTBackends, string(nft), "10.97.38.30", 80, two},
		{"nft one", parseNFTBackends, string(nft), "10.97.34.204", 25, []string{"10.214.1.71:2525"}},
		{"nft unknown", parseNFTBackends, string(nft), "10.1.1.1", 80, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.fn(tc.in, tc.ip, tc.port)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Above 1,000 endpoints kube-proxy writes no comments: the backends come
// from the DNAT rules of the KUBE-SEP chains.
func TestParseIPTablesLargeCluster(t *testing.T) {
	in := `-A KUBE-SERVICES -d 10.96.0.9/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X
-A KUBE-SVC-X -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A
-A KUBE-SVC-X -j KUBE-SEP-B
-A KUBE-SEP-A -s 10.128.0.1/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.128.0.1:8080
-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.128.0.2:8080
`
	got, err := parseIPTablesBackends(in, "10.96.0.9", 80)
	if err != nil || !reflect.DeepEqual(got, []string{"10.128.0.1:8080", "10.128.0.2:8080"}) {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestParseIPTablesBadLine(t *testing.T) {
	in := "-A KUBE-SERVICES -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X\n-A KUBE-SVC-X -j KUBE-SEP-Y\n"
	if _, err := parseIPTablesBackends(in, "10.0.0.1", 80); err == nil {
		t.Fatal("want an error naming line 2")
	} else if want := "line 2"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}

func TestExecSleep(t *testing.T) {
	for _, tc := range []struct {
		cmd  []string
		want float64
	}{
		{[]string{"sleep", "5"}, 5},
		{[]string{"/bin/sleep", "1.5"}, 1.5},
		{[]string{"/bin/sh", "-c", "sleep 3"}, 3},
		{[]string{"sh", "-c", "sleep 3 && echo"}, 0},
		{[]string{"sleep", "x"}, 0},
		{nil, 0},
	} {
		if got := execSleep(tc.cmd).Seconds(); got != tc.want {
			t.Errorf("execSleep(%q) = %v, want %v", tc.cmd, got, tc.want)
		}
	}
}
