package iptables

import (
	"fmt"
	"strconv"
	"strings"
)

// ipTable is one table (*nat, *filter, ...) of an iptables-save or
// iptables-restore text: its chains in declaration order and their rules.
type ipTable struct {
	name   string
	line   int // the line of its header
	chains map[string]*ipChain
	last   *ipChain   // the chain of the previous rule (dumps group rules by chain)
	order  []*ipChain // chains in declaration order (text dumps only)
	next   int        // index in order after last's (iptables-save lists rules in that order)
	slab   []ipRule   // rules are allocated in blocks
	ptrs   []*ipRule  // and chains' first rule slots too
	toks   []string   // the netlink reader's tokenizer buffer, reused
	// netlink reader only: chain names by handle (chainByHandle), nil
	// until first asked
	byHandle map[uint64]string
}

// ipChain is one chain and, once walked, where it sends traffic.
type ipChain struct {
	name  string
	rules []*ipRule
	res   chainResult // resolved nat result, valid when done
	done  bool
	busy  bool // being resolved (jump-loop detection)
	dead  bool // deleted or declared again (stale entry in the order list)
	// netlink reader only: the chain's handle and every rule the kernel
	// holds, in order (rules it does not parse included), for patching the
	// chain from change messages (netlink_ops.go).
	handle uint64
	nl     []nlSlot
}

// nlSlot is one kernel rule of a chain: its handle, content key and parse
// (nil: a rule the dump parser skips, KUBE-MARK-MASQ jumps).
type nlSlot struct {
	handle, key uint64
	rule        *ipRule
}

// chain returns a chain by name, or nil.
func (t *ipTable) chain(name string) *ipChain {
	if t.last != nil && t.last.name == name {
		return t.last
	}
	return t.chains[name]
}

// ruleChain finds the chain of a rule line. iptables-save prints rules
// grouped by chain in declaration order, so the chain is usually the last
// one or one of the next few declared: no map lookup for most rules.
func (t *ipTable) ruleChain(name string) *ipChain {
	if t.last != nil && t.last.name == name {
		return t.last
	}
	for i := t.next; i < len(t.order) && i < t.next+8; i++ {
		if c := t.order[i]; c.name == name && !c.dead {
			t.next = i + 1
			return c
		}
	}
	return t.chains[name]
}

// ruleSlots returns an empty rule list with room for a few rules, carved
// from a shared block (most kube-proxy chains hold two rules).
func (t *ipTable) ruleSlots() []*ipRule {
	const slots = 4
	if cap(t.ptrs)-len(t.ptrs) < slots {
		t.ptrs = make([]*ipRule, 0, 4096)
	}
	n := len(t.ptrs)
	t.ptrs = t.ptrs[:n+slots]
	return t.ptrs[n : n : n+slots]
}

// rules returns the rules of a chain (nil if it does not exist).
func (t *ipTable) rules(name string) []*ipRule {
	if c := t.chain(name); c != nil {
		return c.rules
	}
	return nil
}

// newRule returns a zeroed rule from the table's current block.
func (t *ipTable) newRule() *ipRule {
	if len(t.slab) == cap(t.slab) {
		t.slab = make([]ipRule, 0, 1024)
	}
	t.slab = t.slab[:len(t.slab)+1]
	return &t.slab[len(t.slab)-1]
}

// ipDump is every table of one address family's dump.
type ipDump map[string]*ipTable

// parseDump reads iptables-save output or iptables-restore input (as
// kube-proxy writes it) holding each table once. It accepts any tables;
// errors name the line.
func parseDump(text string) (ipDump, error) {
	parts, err := parseDumpParts(text)
	if err != nil {
		return nil, err
	}
	if len(parts) > 1 {
		return nil, fmt.Errorf("line %d: table %q appears a second time", parts[1].line, parts[1].first)
	}
	return parts[0].d, nil
}

// dumpPart is one iptables-save output of a file that may hold several
// (`iptables-legacy-save; iptables-nft-save` concatenated): a table
// seen a second time starts a new part.
type dumpPart struct {
	d     ipDump
	line  int    // the line of its first table header
	first string // the name of its first table
}

func parseDumpParts(text string) ([]dumpPart, error) {
	parts := []dumpPart{{d: ipDump{}, line: 1}}
	hint := strings.Count(text, "\n:") // chain declarations: presize the maps
	var cur *ipTable
	var toks []string
	lineNo := 0
	for len(text) > 0 {
		lineNo++
		var line string
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			line, text = text, ""
		}
		// Pastes are often indented (tabs, Markdown blocks): leading
		// whitespace carries no meaning in iptables-save text.
		line = strings.Trim(line, "\r \t")
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '*' && cur == nil {
			p := &parts[len(parts)-1]
			name := strings.TrimSpace(line[1:])
			if _, again := p.d[name]; again {
				parts = append(parts, dumpPart{d: ipDump{}, line: lineNo, first: name})
			} else if len(p.d) == 0 {
				p.line, p.first = lineNo, name
			}
		}
		var err error
		cur, toks, err = parseDumpLine(parts[len(parts)-1].d, cur, line, toks[:0], hint, lineNo)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: table %q has no COMMIT (truncated dump?)", lineNo, cur.name)
	}
	return parts, nil
}

func parseDumpLine(d ipDump, cur *ipTable, line string, toks []string, hint, lineNo int) (*ipTable, []string, error) {
	switch {
	case line[0] == '*':
		if cur != nil {
			return cur, toks, fmt.Errorf("table %q starts before table %q is committed", line[1:], cur.name)
		}
		name := strings.TrimSpace(line[1:])
		if name == "" || strings.ContainsAny(name, " \t") {
			return cur, toks, fmt.Errorf("bad table header %q", line)
		}
		t := d[name]
		if t == nil {
			t = &ipTable{name: name, line: lineNo, chains: make(map[string]*ipChain, hint)}
			d[name] = t
		}
		return t, toks, nil
	case line == "COMMIT":
		if cur == nil {
			return cur, toks, fmt.Errorf("COMMIT outside a table")
		}
		return nil, toks, nil
	}
	if cur == nil {
		return cur, toks, fmt.Errorf("%q outside a table", clip(line))
	}
	if line[0] == ':' {
		return cur, toks, cur.declare(line)
	}
	if line[0] == '[' { // iptables-save -c: "[packets:bytes] -A ..."
		i := strings.IndexByte(line, ']')
		if i < 0 {
			return cur, toks, fmt.Errorf("bad counter prefix in %q", clip(line))
		}
		line = strings.TrimLeft(line[i+1:], " \t")
	}
	if skip, err := cur.skipMarkRule(line); skip || err != nil {
		return cur, toks, err
	}
	toks, err := tokenize(line, toks)
	if err != nil {
		return cur, toks, err
	}
	return cur, toks, cur.command(toks, line)
}

// declare handles ":CHAIN POLICY [packets:bytes]".
func (t *ipTable) declare(line string) error {
	name := line[1:]
	if i := strings.IndexAny(name, " \t"); i >= 0 {
		name = name[:i]
	}
	if name == "" {
		return fmt.Errorf("bad chain declaration %q", clip(line))
	}
	// iptables-restore semantics: declaring a chain flushes it, so a new
	// empty chain replaces any earlier one (one map operation).
	c := &ipChain{name: name}
	n := len(t.chains)
	t.chains[name] = c
	if len(t.chains) == n { // declared again (rare): retire the old entry
		for _, o := range t.order {
			if o.name == name && o != c {
				o.dead = true
			}
		}
	}
	t.order = append(t.order, c)
	if t.last != nil && t.last.name == name {
		t.last = c
	}
	return nil
}

// command applies one -A/-I/-N/-F/-X command line.
func (t *ipTable) command(toks []string, line string) error {
	if len(toks) < 2 {
		return fmt.Errorf("incomplete command %q", clip(line))
	}
	name := toks[1]
	c := t.ruleChain(name)
	op := toks[0]
	switch op {
	case "-A", "--append", "-I", "--insert":
		if c == nil {
			return fmt.Errorf("rule for undeclared chain %q", name)
		}
		t.last = c
		return t.addRule(c, op == "-I" || op == "--insert", toks[2:], line)
	}
	switch op {
	case "-N", "--new-chain", "-F", "--flush", "-X", "--delete-chain":
	default:
		return fmt.Errorf("unsupported command %q", op)
	}
	if len(toks) > 2 {
		return fmt.Errorf("unexpected arguments after %s %s", op, name)
	}
	switch op {
	case "-N", "--new-chain":
		if c == nil {
			t.chains[name] = &ipChain{name: name}
		}
	case "-F", "--flush":
		if c != nil {
			c.rules = nil
		}
	case "-X", "--delete-chain":
		if c != nil {
			c.dead = true
		}
		delete(t.chains, name)
		t.last = nil
	}
	return nil
}

// addRule appends (or, for -I [pos], inserts) a rule.
func (t *ipTable) addRule(c *ipChain, insert bool, args []string, line string) error {
	pos := 0
	if insert && len(args) > 0 && isDigits(args[0]) {
		pos, _ = strconv.Atoi(args[0])
		args = args[1:]
	}
	r := t.newRule()
	if err := parseRule(r, c.name, args, line); err != nil {
		return err
	}
	if !insert {
		if c.rules == nil {
			c.rules = t.ruleSlots()
		}
		c.rules = append(c.rules, r)
		return nil
	}
	if pos <= 0 || pos > len(c.rules) {
		pos = 1
	}
	c.rules = append(c.rules[:pos-1], append([]*ipRule{r}, c.rules[pos-1:]...)...)
	return nil
}

// skipMarkRule drops "-A CHAIN ... -j KUBE-MARK-MASQ" rules without
// parsing them: masquerade marks never change where traffic goes, and they
// are a quarter of a large dump. Lines with escapes take the full path.
func (t *ipTable) skipMarkRule(line string) (bool, error) {
	const suffix = " -j KUBE-MARK-MASQ"
	if !strings.HasPrefix(line, "-A ") || !strings.HasSuffix(line, suffix) ||
		strings.IndexByte(line, '\\') >= 0 || strings.Count(line, `"`)%2 != 0 {
		return false, nil
	}
	name := line[3:]
	if i := strings.IndexByte(name, ' '); i > 0 {
		name = name[:i]
	}
	c := t.ruleChain(name)
	if c == nil {
		return true, fmt.Errorf("rule for undeclared chain %q", name)
	}
	t.last = c
	return true, nil
}

// tokenize splits a rule line the way iptables-restore does: whitespace
// separates arguments, double quotes group them, backslash escapes a character.
// Plain arguments are substrings of line (no copy).
func tokenize(line string, toks []string) ([]string, error) {
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i >= len(line) {
			break
		}
		start := i
		for i < len(line) && tokenByte[line[i]] == tokPlain {
			i++
		}
		if i == len(line) || tokenByte[line[i]] == tokSpace {
			toks = append(toks, line[start:i])
			continue
		}
		tok, next, err := quotedToken(line, start)
		if err != nil {
			return toks, err
		}
		toks = append(toks, tok)
		i = next
	}
	return toks, nil
}

// tokenByte sorts a rule line's bytes for tokenize: argument separators,
// quotes and escapes, and the rest (one table load a byte instead of four
// comparisons, on the hot path of an offline diff's tokenizing).
var tokenByte = func() (t [256]uint8) {
	t[' '], t['\t'] = tokSpace, tokSpace
	t['"'], t['\\'] = tokQuote, tokQuote
	return t
}()

const (
	tokPlain = iota
	tokSpace
	tokQuote
)

// quotedToken reads one argument that contains quotes or escapes.
func quotedToken(line string, i int) (string, int, error) {
	var b strings.Builder
	inQuote := false
	quoteAt := 0
	for ; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\':
			if i+1 >= len(line) {
				return "", i, fmt.Errorf("position %d: trailing backslash", i+1)
			}
			i++
			b.WriteByte(line[i])
		case c == '"':
			inQuote = !inQuote
			quoteAt = i
		case (c == ' ' || c == '\t') && !inQuote:
			return b.String(), i, nil
		default:
			b.WriteByte(c)
		}
	}
	if inQuote {
		return "", i, fmt.Errorf("position %d: unterminated quote", quoteAt+1)
	}
	return b.String(), i, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
