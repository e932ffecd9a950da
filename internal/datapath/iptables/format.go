package iptables

import (
	"bytes"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/netdrift/netdrift/internal/model"
)

// prepare checks that text is iptables-save (or iptables-restore) syntax
// before it is parsed. `iptables -S` output, which has the same rule syntax
// but no table headers, is rewritten as iptables-save text (with a note).
// Other captures people paste instead (`iptables -L`, `nft list`, nft JSON,
// ipvsadm) are refused with an error naming the line and what to run.
func prepare(text string) (string, []string, error) {
	first, lineNo := firstLine(text)
	if first == "" {
		return text, nil, nil
	}
	if hint := notSaveHint(first); hint != "" {
		return "", nil, fmt.Errorf("line %d: %q: %s", lineNo, clip(first), hint)
	}
	if ruleSpecForm(first) {
		return fromRuleSpecs(text)
	}
	return text, nil, nil
}

// firstLine is the first line of text that is neither blank nor a comment,
// trimmed, and its number ("" when there is none).
func firstLine[T string | []byte](text T) (string, int) {
	lineNo := 0
	for len(text) > 0 {
		lineNo++
		i := 0
		for i < len(text) && text[i] != '\n' {
			i++
		}
		line := text[:i]
		text = text[min(i+1, len(text)):]
		if l := strings.TrimSpace(string(line)); l != "" && l[0] != '#' {
			return l, lineNo
		}
	}
	return "", lineNo
}

// ruleSpecForm reports whether a dump whose first line is first is
// `iptables -S` output (rule specifications without table headers).
func ruleSpecForm(first string) bool {
	if first[0] == '*' || first[0] == ':' || first[0] == '[' || first == "COMMIT" {
		return false
	}
	return strings.HasPrefix(first, "-P ") || strings.HasPrefix(first, "-N ") || strings.HasPrefix(first, "-A ")
}

// notSaveHint names the right capture when a line shows the text is another
// command's output ("" when it may be iptables syntax).
func notSaveHint(line string) string {
	switch {
	case line[0] == '{' || line[0] == '[' && strings.HasPrefix(strings.TrimLeft(line[1:], " \t"), "{"):
		return "this is JSON (`nft -j` output): pass it as --nft-json"
	case strings.HasPrefix(line, "table ip") || strings.HasPrefix(line, "table inet") ||
		strings.HasPrefix(line, "chain ") || strings.HasPrefix(line, "flush ruleset"):
		return "this is `nft list` text, which netdrift does not read: for kube-proxy's nftables mode capture " +
			"`nft -j list ruleset` and pass it as --nft-json; for its iptables mode capture `iptables-save`"
	case strings.HasPrefix(line, "Chain ") || strings.HasPrefix(line, "target ") && strings.Contains(line, "prot"):
		return "this is `iptables -L` output, which leaves out what a rule matches: capture `iptables-save` " +
			"(or `iptables-save -t nat; iptables-save -t filter`)"
	case strings.HasPrefix(line, "IP Virtual Server") || strings.HasPrefix(line, "Prot LocalAddress") ||
		strings.HasPrefix(line, "-A -t ") || strings.HasPrefix(line, "-A -u ") || strings.HasPrefix(line, "-A -f ") ||
		strings.HasPrefix(line, "-A --sctp-service "):
		return "this is ipvsadm output: pass it as --ipvsadm-save"
	}
	return ""
}

// builtinTables maps the built-in chains an `iptables -S` listing sets
// policies for to the table it lists.
var builtinTables = map[string]string{
	"INPUT,OUTPUT,POSTROUTING,PREROUTING":         "nat",
	"FORWARD,INPUT,OUTPUT":                        "filter",
	"OUTPUT,PREROUTING":                           "raw",
	"FORWARD,INPUT,OUTPUT,POSTROUTING,PREROUTING": "mangle",
}

// fromRuleSpecs rewrites `iptables [-t TABLE] -S` output (one or more
// listings, each starting with its -P lines) as iptables-save text. The
// table of a listing is told by its built-in chains; a listing without -P
// lines (one chain listed) is nat when it DNATs or jumps to kube-proxy's
// service chains, and is refused otherwise.
func fromRuleSpecs(text string) (string, []string, error) {
	type listing struct {
		builtins []string
		lines    []string
		start    int
	}
	var ls []*listing
	var cur *listing
	prevPolicy := false
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' {
			continue
		}
		policy := strings.HasPrefix(line, "-P ")
		if cur == nil || policy && !prevPolicy {
			cur = &listing{start: i + 1}
			ls = append(ls, cur)
		}
		prevPolicy = policy
		f := strings.Fields(line)
		switch {
		case policy:
			if len(f) != 3 {
				return "", nil, fmt.Errorf("line %d: bad policy line %q in `iptables -S` output", i+1, clip(line))
			}
			cur.builtins = append(cur.builtins, f[1])
			cur.lines = append(cur.lines, ":"+f[1]+" "+f[2]+" [0:0]")
		case strings.HasPrefix(line, "-N "):
			if len(f) != 2 {
				return "", nil, fmt.Errorf("line %d: bad chain line %q in `iptables -S` output", i+1, clip(line))
			}
			cur.lines = append(cur.lines, ":"+f[1]+" - [0:0]")
		case strings.HasPrefix(line, "-A "):
			cur.lines = append(cur.lines, line)
		case line[0] == '*':
			return "", nil, fmt.Errorf("line %d: iptables-save table header in `iptables -S` output: give one or the other", i+1)
		default:
			return "", nil, fmt.Errorf("line %d: %q is not `iptables -S` output (-P, -N or -A): capture `iptables-save`", i+1, clip(line))
		}
	}
	var b strings.Builder
	var names []string
	seen := map[string]int{}
	for _, l := range ls {
		sort.Strings(l.builtins)
		name := builtinTables[strings.Join(l.builtins, ",")]
		if name == "" && len(l.builtins) == 0 && natListing(l.lines) {
			name = "nat"
		}
		if name == "" {
			return "", nil, fmt.Errorf("line %d: cannot tell which table this `iptables -S` listing shows: capture `iptables-save`", l.start)
		}
		if at, dup := seen[name]; dup {
			return "", nil, fmt.Errorf("line %d: a second `iptables -S` listing of table %s (the first starts at line %d): capture `iptables-save`", l.start, name, at)
		}
		seen[name] = l.start
		names = append(names, name)
		b.WriteString("*" + name + "\n")
		declared := map[string]bool{}
		for _, ln := range l.lines {
			if ln[0] == ':' {
				declared[strings.Fields(ln[1:])[0]] = true
			}
		}
		// A single-chain listing (`iptables -t nat -S KUBE-SERVICES`) has
		// rules for chains it does not declare: declare them.
		for _, ln := range l.lines {
			if f := strings.Fields(ln); f[0] == "-A" && len(f) > 1 && !declared[f[1]] {
				declared[f[1]] = true
				b.WriteString(":" + f[1] + " - [0:0]\n")
			}
		}
		for _, ln := range l.lines {
			b.WriteString(ln + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	note := fmt.Sprintf("read as `iptables -S` output (table %s); `iptables-save` is the capture netdrift expects", strings.Join(names, ", "))
	return b.String(), []string{note}, nil
}

// natListing reports whether rules DNAT or jump to kube-proxy's nat chains.
func natListing(lines []string) bool {
	for _, ln := range lines {
		if strings.Contains(ln, "-j DNAT") || strings.Contains(ln, "-j KUBE-SVC-") || strings.Contains(ln, "-j KUBE-SEP-") ||
			strings.Contains(ln, "-j KUBE-EXT-") || strings.Contains(ln, "-j KUBE-NODEPORTS") || strings.Contains(ln, "-j KUBE-MARK-MASQ") {
			return true
		}
	}
	return false
}

// DumpFamily tells the address family of an iptables-save text from the
// addresses its rules match and DNAT to. ok is false when it names none;
// mixed when it names both (two families' dumps in one file).
//
// It reads the text in place, line by line (a copy to a string and a field
// iterator over every line would be a large share of an offline diff's
// CPU), and stops once it has seen both families.
func DumpFamily(text []byte) (fam model.IPFamily, mixed, ok bool) {
	var n familyCount
	for len(text) > 0 && n.v4 == 0 {
		var line []byte
		line, text, _ = bytes.Cut(text, newline)
		n.line(line)
	}
	if n.v4 > 0 && n.v6 == 0 {
		n.colonFields(text)
	}
	switch {
	case n.v4 > 0 && n.v6 > 0:
		return "", true, true
	case n.v6 > 0:
		return model.IPv6, false, true
	case n.v4 > 0:
		return model.IPv4, false, true
	}
	return "", false, false
}

var newline = []byte{'\n'}

// familyCount counts the addresses of each family a dump's rules name.
type familyCount struct{ v4, v6 int }

// line counts the address after every -d, -s, --destination, --source and
// --to-destination field of one line, fields as strings.Fields splits
// them. A line with a non-ASCII byte (which may be a Unicode space) is
// read again through strings.Fields: counting an address twice changes
// nothing, only whether a family was seen matters.
func (n *familyCount) line(line []byte) {
	addrNext := false
	for i := 0; i < len(line); {
		if byteClass[line[i]] == classSpace {
			i++
			continue
		}
		j := i
		for j < len(line) && byteClass[line[j]] == classField {
			j++
		}
		if j < len(line) && byteClass[line[j]] == classOther {
			n.fields(strings.Fields(string(line)))
			return
		}
		f := line[i:j]
		if addrNext {
			n.addr(f)
		}
		addrNext = f[0] == '-' && isAddrFlag(f)
		i = j
	}
}

// colonFields reads the rest of a dump once an IPv4 address was seen: only
// an IPv6 address changes the outcome then, and every IPv6 form holds a
// colon, so only the fields that hold one are looked at, each with the
// field before it in its line (as line would split them). Where a
// non-ASCII byte borders them, their line is read by line.
func (n *familyCount) colonFields(text []byte) {
	for n.v6 == 0 {
		i := bytes.IndexByte(text, ':')
		if i < 0 {
			return
		}
		start, end := fieldAround(text, i)
		p := start // the field before, in the same line
		for p > 0 && byteClass[text[p-1]] == classSpace && text[p-1] != '\n' {
			p--
		}
		prevEnd := p
		for p > 0 && byteClass[text[p-1]] == classField {
			p--
		}
		if isOther(text, start-1) || isOther(text, end) || isOther(text, p-1) {
			ls := bytes.LastIndexByte(text[:i], '\n') + 1
			le := len(text)
			if j := bytes.IndexByte(text[i:], '\n'); j >= 0 {
				le = i + j
			}
			n.line(text[ls:le])
			text = text[le:]
			continue
		}
		if prev := text[p:prevEnd]; len(prev) > 0 && prev[0] == '-' && isAddrFlag(prev) {
			n.addr(text[start:end])
		}
		text = text[end:]
	}
}

// fieldAround is the field (a run of classField bytes) holding text[i].
func fieldAround(text []byte, i int) (start, end int) {
	start, end = i, i
	for start > 0 && byteClass[text[start-1]] == classField {
		start--
	}
	for end < len(text) && byteClass[text[end]] == classField {
		end++
	}
	return start, end
}

func isOther(text []byte, i int) bool {
	return i >= 0 && i < len(text) && byteClass[text[i]] == classOther
}

func (n *familyCount) fields(fields []string) {
	for i := 1; i < len(fields); i++ {
		if isAddrFlag([]byte(fields[i-1])) {
			n.addr([]byte(fields[i]))
		}
	}
}

// addr counts one address argument. Once an IPv4 address was seen, only
// an IPv6 one changes the outcome, and every IPv6 form holds a colon.
func (n *familyCount) addr(f []byte) {
	if n.v4 > 0 && bytes.IndexByte(f, ':') < 0 {
		return
	}
	if addr, ok := ruleAddr(string(f)); ok && (addr.Is4() || addr.Is4In6()) {
		n.v4++
	} else if ok {
		n.v6++
	}
}

func isAddrFlag(f []byte) bool {
	switch string(f) {
	case "-d", "-s", "--destination", "--source", "--to-destination":
		return true
	}
	return false
}

// byteClass sorts bytes for the field scan: ASCII spaces (as
// strings.Fields has them), other ASCII bytes, and non-ASCII bytes.
var byteClass = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = classOther
		case c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
			t[c] = classSpace
		}
	}
	return t
}()

const (
	classField = iota
	classSpace
	classOther
)

// ruleAddr is the address of a rule's address argument: an address, a
// prefix (address/bits or address/mask) or a DNAT target (address:port).
func ruleAddr(a string) (netip.Addr, bool) {
	if j := strings.IndexByte(a, '/'); j >= 0 {
		a = a[:j]
	}
	if ap, err := netip.ParseAddrPort(a); err == nil {
		return ap.Addr(), true
	}
	addr, err := netip.ParseAddr(a)
	return addr, err == nil
}

// HasTable reports whether a dump (iptables-save or `iptables -S` text)
// holds the named table. A dump that cannot be read reports false.
func HasTable(text []byte, name string) bool {
	first, _ := firstLine(text)
	switch {
	case first == "" || notSaveHint(first) != "":
		return false
	case ruleSpecForm(first):
		s, _, err := fromRuleSpecs(string(text))
		return err == nil && hasTableHeader([]byte(s), name)
	}
	return hasTableHeader(text, name) // read in place: no copy of the dump
}

// hasTableHeader reports whether a line of iptables-save text is "*name".
func hasTableHeader(text []byte, name string) bool {
	for len(text) > 0 {
		var line []byte
		line, text, _ = bytes.Cut(text, newline)
		if l := bytes.TrimSpace(line); len(l) == len(name)+1 && l[0] == '*' && string(l[1:]) == name {
			return true
		}
	}
	return false
}
