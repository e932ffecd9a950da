package archtest

import (
	"fmt"
	"sort"
	"strings"
)

// pkgInfo is what the checker needs of one package of the module: its
// direct imports and its transitive dependencies (full import paths).
type pkgInfo struct {
	Imports []string
	Deps    []string
}

// matches reports whether the module-relative package p is name or, for
// "x/...", x or below it.
func matches(name, p string) bool {
	if base, ok := strings.CutSuffix(name, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == name
}

// resolve turns a name of an import list into the module-relative name it
// denotes: under internal/ if that matches a package, else as written. It
// fails when neither matches a package.
func resolve(name string, all map[string]pkgInfo) (string, error) {
	for _, cand := range []string{"internal/" + name, name} {
		for p := range all {
			if matches(cand, p) {
				return cand, nil
			}
		}
	}
	return "", fmt.Errorf("%q names no package of the module", name)
}

// checkTable checks every package's netdrift imports against its row of the
// "may import" table. Every package needs exactly one row, every row must
// match a package, every name must denote one.
func checkTable(rows []row, all map[string]pkgInfo, mod string) []string {
	var bad []string
	allowed := map[int][]string{}
	for i, r := range rows {
		hit := false
		for p := range all {
			hit = hit || matches(r.key, p)
		}
		if !hit {
			bad = append(bad, fmt.Sprintf("line %d: the row %s matches no package of the module", r.line, r.key))
		}
		for _, n := range r.names {
			res, err := resolve(n, all)
			if err != nil {
				bad = append(bad, fmt.Sprintf("line %d (%s): %v", r.line, r.key, err))
				continue
			}
			allowed[i] = append(allowed[i], res)
		}
	}
	for _, p := range sorted(all) {
		var mine []int
		for i, r := range rows {
			if matches(r.key, p) {
				mine = append(mine, i)
			}
		}
		if len(mine) != 1 {
			bad = append(bad, fmt.Sprintf("%s has %d rows in the table: it needs exactly one", p, len(mine)))
			continue
		}
		for _, imp := range all[p].Imports {
			rel, ok := strings.CutPrefix(imp, mod)
			if !ok || permitted(rel, allowed[mine[0]]) {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s imports %s, which its row (line %d) does not allow", p, rel, rows[mine[0]].line))
		}
	}
	return bad
}

func permitted(p string, names []string) bool {
	for _, n := range names {
		if matches(n, p) {
			return true
		}
	}
	return false
}

// checkExternal checks the "External modules" table: a module (or a path
// below it) is imported directly only by the packages its row names.
func checkExternal(rows []row, all map[string]pkgInfo) []string {
	var bad []string
	for _, r := range rows {
		var only []string
		for _, n := range r.names {
			res, err := resolve(n, all)
			if err != nil {
				bad = append(bad, fmt.Sprintf("line %d (%s): %v", r.line, r.key, err))
				continue
			}
			only = append(only, res)
		}
		for _, p := range sorted(all) {
			for _, imp := range all[p].Imports {
				if (imp == r.key || strings.HasPrefix(imp, r.key+"/")) && !permitted(p, only) {
					bad = append(bad, fmt.Sprintf("%s imports %s: only %s may (line %d)", p, imp, strings.Join(r.names, ", "), r.line))
				}
			}
		}
	}
	return bad
}

// ban: packages matching from must not depend, even transitively, on any
// path under the banned prefixes.
type ban struct {
	from   string
	banned []string
	why    string
}

func checkBans(bans []ban, all map[string]pkgInfo) []string {
	var bad []string
	for _, b := range bans {
		hit := false
		for _, p := range sorted(all) {
			if !matches(b.from, p) {
				continue
			}
			hit = true
			for _, d := range all[p].Deps {
				for _, x := range b.banned {
					if d == x || strings.HasPrefix(d, x+"/") {
						bad = append(bad, fmt.Sprintf("%s depends on %s: %s", p, d, b.why))
					}
				}
			}
		}
		if !hit {
			bad = append(bad, fmt.Sprintf("the rule for %s matches no package: the layout changed, update it", b.from))
		}
	}
	return bad
}

func sorted(all map[string]pkgInfo) []string {
	ps := make([]string, 0, len(all))
	for p := range all {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}
