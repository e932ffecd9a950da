package vmtest

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"
)

// modDep is a parsed modules.dep: module path (relative to
// /lib/modules/VERSION) -> the paths it depends on.
type modDep struct {
	deps   map[string][]string
	byName map[string]string // normalised module name -> path
}

// parseModulesDep parses modules.dep ("kernel/a.ko: kernel/b.ko kernel/c.ko").
func parseModulesDep(data []byte) (*modDep, error) {
	m := &modDep{deps: map[string][]string{}, byName: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		mod, rest, ok := strings.Cut(line, ":")
		if !ok || mod == "" {
			return nil, fmt.Errorf("modules.dep line %d: no ':' in %q", n, line)
		}
		m.deps[mod] = strings.Fields(rest)
		m.byName[modName(mod)] = mod
	}
	return m, sc.Err()
}

// modName turns "kernel/net/netfilter/nf_conntrack.ko" into "nf_conntrack"
// (dashes as underscores, as the kernel names modules).
func modName(p string) string {
	b := path.Base(p)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

// loadOrder returns the module paths to insmod, dependencies first, for the
// named modules. Unknown names are returned separately (built-in or absent).
func (m *modDep) loadOrder(names []string) (order, unknown []string) {
	done := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		if done[p] {
			return
		}
		done[p] = true
		for _, d := range m.deps[p] {
			visit(d)
		}
		order = append(order, p)
	}
	for _, n := range names {
		p, ok := m.byName[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		visit(p)
	}
	return order, unknown
}

// closure returns the given module paths plus everything they depend on, sorted.
func (m *modDep) closure(paths []string) []string {
	set := map[string]bool{}
	var add func(p string)
	add = func(p string) {
		if set[p] {
			return
		}
		set[p] = true
		for _, d := range m.deps[p] {
			add(d)
		}
	}
	for _, p := range paths {
		add(p)
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// under returns the module paths below any of the directory prefixes.
func (m *modDep) under(dirs []string) []string {
	var out []string
	for p := range m.deps {
		for _, d := range dirs {
			if strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
				out = append(out, p)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
