// Package archtest checks docs/architecture.md's package map against the
// imports the Go toolchain reports: the "may import" table and the
// "External modules" table are read from the doc itself, so the doc is the
// one place the rules are written.
package archtest

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const (
	mod     = "github.com/netdrift/netdrift/"
	docPath = "../../docs/architecture.md"
)

// bans hold for dependencies at any depth: domain types stay free of API and
// netlink structs.
var bans = []ban{
	{"internal/model", []string{"k8s.io/client-go", "k8s.io/api", "github.com/vishvananda/netlink"},
		"domain types are free of API and netlink structs"},
}

// packages lists every package of the module (test files excluded: the
// rules are about the product) with its imports and dependencies.
func packages(t *testing.T) map[string]pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = "../.."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string]pkgInfo{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			pkgInfo
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		all[strings.TrimPrefix(p.ImportPath, mod)] = p.pkgInfo
	}
	if len(all) < 10 {
		t.Fatalf("go list reported %d packages: not the module", len(all))
	}
	return all
}

func docRows(t *testing.T, heading string, list int) []row {
	t.Helper()
	f, err := os.Open(docPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := readTable(f, heading, list)
	if err != nil {
		t.Fatalf("%s: %v", docPath, err)
	}
	return rows
}

func report(t *testing.T, bad []string) {
	t.Helper()
	for _, b := range bad {
		t.Error(b)
	}
}

func TestPackageTable(t *testing.T) {
	report(t, checkTable(docRows(t, packagesHeading, -1), packages(t), mod))
}

func TestExternalModules(t *testing.T) {
	report(t, checkExternal(docRows(t, externalHeading, 1), packages(t)))
}

func TestBans(t *testing.T) {
	report(t, checkBans(bans, packages(t)))
}
