package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

// TestMain lets the test binary act as netdrift itself (NETDRIFT_AS_MAIN=1),
// so process tests exec the real main without a second build.
func TestMain(m *testing.M) {
	if os.Getenv("NETDRIFT_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// selfBinary is this test binary, which runs netdrift when NETDRIFT_AS_MAIN=1.
func selfBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func runBin(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	return runIn(t, "", bin, args...)
}

type diffJSON struct {
	Node     string `json:"node"`
	Datapath string `json:"datapath"`
	Findings []struct {
		Kind, Service, Port, Protocol, Frontend, Backend, Detail string
		FrontendKind                                             string `json:"frontend_kind"`
	} `json:"findings"`
}

func TestDiffProcess(t *testing.T) {
	bin := selfBinary(t)
	td := fixture.Dir() + "/"
	t.Run("no_findings_on_converged_iptables", func(t *testing.T) {
		out, errs, code := runBin(t, bin, "diff", "--node", "worker-a", "--cluster", td+"cluster.json",
			"--iptables-save", td+"worker-a.iptables-save", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d, stderr %s\n%s", code, errs, out)
		}
		var r diffJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Node != "worker-a" || r.Datapath != "iptables" || len(r.Findings) != 0 {
			t.Fatalf("report %+v err %v\n%s", r, err, out)
		}
		if !strings.Contains(out, `"findings": []`) {
			t.Fatal("findings must be an empty list, not null")
		}
	})
	t.Run("no_findings_on_converged_nftables", func(t *testing.T) {
		_, errs, code := runBin(t, bin, "diff", "--node", "worker-b", "--cluster", td+"cluster.json", "--nft-json", td+"worker-b.nft.json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
	})
	for _, tc := range []struct{ name, node, flag, dump, datapath string }{
		{"stale_iptables", "worker-a", "--iptables-save", "stale.worker-a.iptables-save", "iptables"},
		{"stale_nftables", "worker-b", "--nft-json", "worker-b.nft.json", "nftables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runBin(t, bin, "diff", "--node", tc.node, "--cluster", td+"stale.cluster.json", tc.flag, td+tc.dump, "-o", "json")
			if code != 1 {
				t.Fatalf("exit %d (want 1), stderr %s", code, errs)
			}
			var r diffJSON
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range r.Findings {
				got = append(got, strings.Join([]string{f.Kind, f.Service, f.Port, f.Protocol, f.Frontend, f.FrontendKind, f.Backend}, " "))
				if f.Detail == "" {
					t.Errorf("finding without detail: %+v", f)
				}
			}
			sort.Strings(got)
			want := []string{
				"stale_backend shop/cart grpc TCP 10.97.233.167:9090 cluster_ip 10.214.1.41:50051",
				"stale_backend shop/cart metrics TCP 10.97.233.167:9100 cluster_ip 10.214.1.41:9100",
				"stale_frontend shop/payments https TCP 10.97.230.30:443 cluster_ip ",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") || r.Datapath != tc.datapath {
				t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	t.Run("errors_exit_2", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.json")
		_ = os.WriteFile(bad, []byte("{not json"), 0o644)
		for _, args := range [][]string{
			{"diff", "--cluster", td + "cluster.json", "--iptables-save", td + "worker-a.iptables-save"},
			{"diff", "--node", "worker-a", "--cluster", bad, "--iptables-save", td + "worker-a.iptables-save"},
			{"diff", "--node", "worker-a", "--cluster", td + "cluster.json", "--iptables-save", "/nonexistent"},
			{"diff", "--node", "worker-a", "--cluster", td + "cluster.json", "--iptables-save", td + "worker-a.iptables-save", "-o", "xml"},
			{"diff", "--node", "worker-a", "--cluster", td + "cluster.json", "--iptables-save", td + "worker-a.iptables-save", "-node-name", "x"},
			{"diff", "--bogus"},
			{"nonsense"},
		} {
			_, errs, code := runBin(t, bin, args...)
			if code != 2 || errs == "" {
				t.Errorf("%v: exit %d stderr %q", args, code, errs)
			}
		}
	})
	t.Run("snapshot_json", func(t *testing.T) {
		out, errs, code := runBin(t, bin, "snapshot", "--iptables-save", td+"worker-a.iptables-save", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var r api.SnapshotReport
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Datapath != "iptables" || len(r.Frontends) < 100 {
			t.Fatalf("snapshot %d frontends err %v", len(r.Frontends), err)
		}
		found := false
		for _, f := range r.Frontends {
			if f.Frontend == "10.97.230.30:443" && f.Action == "reject" && f.Service == "shop/payments" {
				found = true
			}
		}
		if !found {
			t.Fatal("payments reject frontend missing from snapshot")
		}
	})
}
