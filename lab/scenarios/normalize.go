package scenarios

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var chainCounters = regexp.MustCompile(`\[[0-9]+:[0-9]+\]$`)

// NormalizeIPTablesSave drops iptables-save's comment lines (they carry the
// dump time) and zeroes chain counters (they count traffic, not rules).
func NormalizeIPTablesSave(s string) string {
	var out []string
	for _, ln := range strings.Split(s, "\n") {
		if strings.HasPrefix(ln, "#") {
			continue
		}
		if strings.HasPrefix(ln, ":") {
			ln = chainCounters.ReplaceAllString(ln, "[0:0]")
		}
		out = append(out, ln)
	}
	return strings.Join(out, "\n")
}

// NormalizeConntrack drops the countdown timer of each `conntrack -L`
// entry (the third field), skips entries touching any of ports (sport= or
// dport=: the agents' and the test's own connections), TCP entries not
// ESTABLISHED (they change state or expire by themselves) and anything that
// is not an entry, and sorts.
func NormalizeConntrack(s string, ports []string) string {
	var out []string
	for _, ln := range strings.Split(s, "\n") {
		f := strings.Fields(ln)
		if len(f) < 4 || strings.Contains(ln, "flow entries have been shown") {
			continue
		}
		if touches(ln, ports) || transient(f) {
			continue
		}
		if _, err := strconv.Atoi(f[2]); err == nil {
			f = append(f[:2:2], f[3:]...)
		}
		out = append(out, strings.Join(f, " "))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// transient reports TCP entries in closing or opening states: the kernel
// moves or expires them by its own timers within the observation window.
func transient(f []string) bool {
	if f[0] != "tcp" || len(f) < 4 {
		return false
	}
	switch f[3] {
	case "ESTABLISHED":
		return false
	}
	return true
}

func touches(ln string, ports []string) bool {
	for _, p := range ports {
		if strings.Contains(ln, "sport="+p+" ") || strings.Contains(ln, "dport="+p+" ") {
			return true
		}
	}
	return false
}
