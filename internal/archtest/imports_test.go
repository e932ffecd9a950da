// Package archtest checks the package rules of docs/architecture.md
// ("Package rules") against the imports the Go toolchain reports.
package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/netdrift/netdrift/"

type pkg struct {
	ImportPath string
	Deps       []string
}

// deps lists every package of the module with its transitive dependencies
// (go list -deps), test files excluded: the rules are about the product.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		m[strings.TrimPrefix(p.ImportPath, mod)] = p.Deps
	}
	return m
}

// rule: packages under from (a prefix) must not depend on any of banned
// (prefixes, module-relative or full import paths).
type rule struct {
	from   string
	banned []string
	why    string
}

var rules = []rule{
	{"internal/datapath", []string{mod + "internal/nodecheck", mod + "internal/agent", mod + "internal/api", mod + "internal/metrics"},
		"readers read the kernel; judging, the loop and presentation are elsewhere"},
	{"internal/datapath/nfevents", []string{mod + "internal/datapath", mod + "internal/ipvs"},
		"the nf_tables change feed has many consumers and imports none of them: readers import it, never the reverse"},
	{"internal/datapath/nftables", []string{mod + "internal/datapath/iptables", mod + "internal/datapath/node"},
		"readers share the change feed (nfevents), not each other's code"},
	{"internal/datapath/iptables", []string{mod + "internal/datapath/nftables", mod + "internal/datapath/node"},
		"readers share the change feed (nfevents), not each other's code"},
	{"internal/ipvs", []string{mod + "internal/datapath"}, "datapath constructs the IPVS reader: the reverse import would be a cycle"},
	{"internal/drift", []string{mod + "internal/datapath", mod + "internal/watch"}, "compare is pure: desired and observed in, findings out"},
	{"internal/model", []string{"k8s.io/client-go", "github.com/vishvananda/netlink", "k8s.io/api"}, "domain types are free of API and netlink structs"},
	{"internal/nodecheck", []string{mod + "internal/datapath", mod + "internal/ipvs"}, "node rules consume model types; they import no reader"},
	{"internal/", []string{mod + "cmd/"}, "nothing imports the binary"},
}

// violations checks every rule against the dependency lists; unmatched
// lists the rules that matched no package (a layout change).
func violations(all map[string][]string, rules []rule) (bad, unmatched []string) {
	checked := map[string]bool{}
	for _, r := range rules {
		for p, ds := range all {
			if !strings.HasPrefix(p, r.from) {
				continue
			}
			checked[r.from] = true
			for _, d := range ds {
				for _, b := range r.banned {
					if strings.HasPrefix(d, b) {
						bad = append(bad, p+" imports "+d+": "+r.why)
					}
				}
			}
		}
		if !checked[r.from] {
			unmatched = append(unmatched, r.from)
		}
	}
	return bad, unmatched
}

func TestImportRules(t *testing.T) {
	bad, unmatched := violations(deps(t), rules)
	for _, b := range bad {
		t.Error(b)
	}
	for _, u := range unmatched {
		t.Errorf("the rule for %s matched no package: the layout changed, update the rule", u)
	}
}

// TestImportRulesCatchViolations: the checker fails on violating dependency
// lists, so the rules can fail at all.
func TestImportRulesCatchViolations(t *testing.T) {
	all := map[string][]string{
		"internal/drift":             {mod + "internal/model", mod + "internal/watch"},
		"internal/ipvs":              {mod + "internal/datapath"},
		"internal/datapath/iptables": {mod + "internal/nodecheck"},
		"internal/datapath/nfevents": {mod + "internal/datapath/nftables"},
		"internal/datapath/nftables": {mod + "internal/datapath/nfevents", mod + "internal/datapath/iptables"},
		"internal/model":             {"k8s.io/client-go/kubernetes"},
		"internal/nodecheck":         {mod + "internal/model"},
		"internal/cli":               {mod + "cmd/agent"},
	}
	bad, unmatched := violations(all, rules)
	if len(bad) != 7 || len(unmatched) != 0 {
		t.Fatalf("want 7 violations, got %d: %q (unmatched %q)", len(bad), bad, unmatched)
	}
}
