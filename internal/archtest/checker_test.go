package archtest

import (
	"slices"
	"strings"
	"testing"
)

// A synthetic module: the checker must report each kind of violation, and
// nothing for a table that matches.
const synthetic = `# x

## Package rules

| package | holds | may import (netdrift) |
| --- | --- | --- |
| ` + "`cmd/app`" + ` | the binary | ` + "`loop`, `model`" + ` |
| ` + "`internal/loop`" + ` | the loop | ` + "`reader/...`, `model`" + ` |
| ` + "`internal/reader/...`" + ` | readers | ` + "`model`" + ` |
| ` + "`internal/model`" + ` | types | — |

## External modules

| module | imported only by | for |
| --- | --- | --- |
| ` + "`k8s.io/client-go`" + ` | ` + "`cmd/app`" + ` | the API |

## Next
`

func syntheticModule() map[string]pkgInfo {
	return map[string]pkgInfo{
		"cmd/app":             {Imports: []string{mod + "internal/loop", mod + "internal/model", "k8s.io/client-go/rest"}},
		"internal/loop":       {Imports: []string{mod + "internal/reader/a", mod + "internal/model", "fmt"}},
		"internal/reader/a":   {Imports: []string{mod + "internal/model"}},
		"internal/reader/a/b": {Imports: []string{mod + "internal/model"}},
		"internal/model":      {Deps: []string{"fmt"}},
	}
}

func tables(t *testing.T, doc string) (pkgs, ext []row) {
	t.Helper()
	pkgs, err := readTable(strings.NewReader(doc), packagesHeading, -1)
	if err != nil {
		t.Fatal(err)
	}
	ext, err = readTable(strings.NewReader(doc), externalHeading, 1)
	if err != nil {
		t.Fatal(err)
	}
	return pkgs, ext
}

func TestCheckerPassesAMatchingModule(t *testing.T) {
	pkgs, ext := tables(t, synthetic)
	if len(pkgs) != 4 || len(ext) != 1 || pkgs[1].key != "internal/loop" || !slices.Equal(pkgs[1].names, []string{"reader/...", "model"}) {
		t.Fatalf("tables read wrong: %+v %+v", pkgs, ext)
	}
	all := syntheticModule()
	if bad := checkTable(pkgs, all, mod); len(bad) != 0 {
		t.Errorf("table violations on a matching module: %q", bad)
	}
	if bad := checkExternal(ext, all); len(bad) != 0 {
		t.Errorf("module violations on a matching module: %q", bad)
	}
}

func TestCheckerReportsViolations(t *testing.T) {
	pkgs, ext := tables(t, synthetic)
	all := syntheticModule()
	all["internal/model"] = pkgInfo{Imports: []string{mod + "internal/loop"}, Deps: []string{"k8s.io/api/core/v1"}}
	all["internal/loop"] = pkgInfo{Imports: []string{mod + "cmd/app", "k8s.io/client-go/informers"}}
	all["internal/stray"] = pkgInfo{}
	delete(all, "cmd/app")

	want := map[string]bool{
		"the row cmd/app matches no package":               false,
		"internal/loop imports cmd/app":                    false,
		"internal/model imports internal/loop":             false,
		"internal/stray has 0 rows":                        false,
		"internal/loop imports k8s.io/client-go/informers": false,
		`"cmd/app" names no package`:                       false,
		"internal/model depends on k8s.io/api/core/v1":     false,
	}
	bad := append(checkTable(pkgs, all, mod), checkExternal(ext, all)...)
	bad = append(bad, checkBans([]ban{{"internal/model", []string{"k8s.io/api"}, "pure"}}, all)...)
	for _, b := range bad {
		for w := range want {
			if strings.Contains(b, w) {
				want[w] = true
			}
		}
	}
	for w, seen := range want {
		if !seen {
			t.Errorf("violation %q not reported; got %q", w, bad)
		}
	}
	if len(bad) != len(want) {
		t.Errorf("want %d violations, got %d: %q", len(want), len(bad), bad)
	}
}

func TestReadTableRefusesAMissingTable(t *testing.T) {
	if _, err := readTable(strings.NewReader("# x\n## Package rules\ntext\n## y\n"), packagesHeading, -1); err == nil {
		t.Error("no error for a heading without a table")
	}
	if _, err := readTable(strings.NewReader("# x\n"), externalHeading, 1); err == nil {
		t.Error("no error for a missing heading")
	}
}
