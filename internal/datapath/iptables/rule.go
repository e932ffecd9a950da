package iptables

import (
	"fmt"
	"strings"
)

// ipRule is the part of one iptables rule that matters for Service
// traffic. It is kept for every rule the readers hold (a few per
// endpoint), so it is small: the option values are spans of the rule's
// own text (any occurrence of the same bytes will do), and only a value
// the text does not hold verbatim (an escaped or negated one) is copied,
// into aux. 80 bytes instead of the 176 of one string per value.
type ipRule struct {
	chain string
	text  string // the rule line as it appeared
	aux   string // values that are not substrings of text ("" for most rules)
	vals  [nVals]span
	inAux uint8 // bit v set: vals[v] is a span of aux
	flags ruleFlags
	tkind targetKind // the target, classified while the line is in cache
}

// span is bytes [off, off+n) of a rule's text or aux.
type span struct{ off, n uint16 }

// The option values a rule keeps.
const (
	valSrc     = iota // -s value ("" if none)
	valDst            // -d value
	valProto          // -p value, lower case ("!tcp" when negated)
	valDport          // --dport value ("!80" when negated)
	valComment        // --comment (unquoted)
	valTarget         // -j / -g value; "" when the rule has no target
	valToDest         // DNAT --to-destination
	nVals
)

// ruleFlags are the rule's boolean matches.
type ruleFlags uint8

const (
	flSrcNeg   ruleFlags = 1 << iota // ! -s
	flDstNeg                         // ! -d
	flSrcType                        // addrtype --src-type (any type: the rule is source-conditional)
	flDstLocal                       // addrtype --dst-type LOCAL (not negated)
	flRandom                         // -m statistic
	flRecent                         // -m recent
)

func (r *ipRule) val(v int) string {
	s := r.vals[v]
	if r.inAux&(1<<v) != 0 {
		return r.aux[s.off : s.off+s.n]
	}
	return r.text[s.off : s.off+s.n]
}

func (r *ipRule) src() string     { return r.val(valSrc) }
func (r *ipRule) dst() string     { return r.val(valDst) }
func (r *ipRule) proto() string   { return r.val(valProto) }
func (r *ipRule) dport() string   { return r.val(valDport) }
func (r *ipRule) comment() string { return r.val(valComment) }
func (r *ipRule) target() string  { return r.val(valTarget) }
func (r *ipRule) toDest() string  { return r.val(valToDest) }

func (r *ipRule) has(f ruleFlags) bool { return r.flags&f != 0 }

// maxSpan bounds offsets and lengths (uint16).
const maxSpan = 1<<16 - 1

// setVal stores value v as a span of the text when the text holds its
// bytes, else appends it to aux.
func (r *ipRule) setVal(v int, val string) error {
	if val == "" {
		r.vals[v], r.inAux = span{}, r.inAux&^(1<<v)
		return nil
	}
	if i := strings.Index(r.text, val); i >= 0 && i+len(val) <= maxSpan {
		r.vals[v], r.inAux = span{uint16(i), uint16(len(val))}, r.inAux&^(1<<v)
		return nil
	}
	if len(r.aux)+len(val) > maxSpan {
		return fmt.Errorf("option values longer than %d bytes in one rule: not a kube-proxy rule", maxSpan)
	}
	r.vals[v], r.inAux = span{uint16(len(r.aux)), uint16(len(val))}, r.inAux|1<<v
	r.aux += val
	return nil
}

// unconditional reports whether a rule matches every packet that reaches
// it (no address, protocol, port, address-type or statistic match).
func (r *ipRule) unconditional() bool {
	return r.vals[valSrc].n == 0 && r.vals[valDst].n == 0 && r.vals[valProto].n == 0 && r.vals[valDport].n == 0 &&
		!r.has(flSrcType|flDstLocal|flRandom|flRecent)
}

// sourceConditional reports whether the rule only matches some sources.
func (r *ipRule) sourceConditional() bool {
	return r.vals[valSrc].n != 0 || r.has(flSrcType)
}

// parseRule reads the arguments of "-A CHAIN args...".
func parseRule(r *ipRule, chain string, args []string, line string) error {
	*r = ipRule{chain: chain, text: line}
	neg := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "!" {
			neg = true
			continue
		}
		if a == "" || a[0] != '-' {
			return fmt.Errorf("unexpected argument %q (argument %d)", clip(a), i+3)
		}
		// Values: the arguments up to the next option or "!".
		j := i + 1
		for j < len(args) && !isOption(args[j]) {
			j++
		}
		vals := args[i+1 : j]
		if err := r.set(a, vals, neg); err != nil {
			return fmt.Errorf("argument %d: %w", i+3, err)
		}
		neg = false
		i = j - 1
	}
	if neg {
		return fmt.Errorf("dangling \"!\"")
	}
	return nil
}

// isOption reports whether an argument starts a new option. Values never
// start with '-' in kube-proxy rules (ports, addresses, names, comments).
func isOption(a string) bool {
	return a == "!" || (len(a) > 1 && a[0] == '-' && (a[1] < '0' || a[1] > '9'))
}

// one returns the single value of an option or an error.
func one(opt string, vals []string) (string, error) {
	if len(vals) != 1 {
		return "", fmt.Errorf("%s wants one value, got %d", opt, len(vals))
	}
	return vals[0], nil
}

// setOne stores the single value of an option; negated (prefix non-empty)
// it is stored with the prefix.
func (r *ipRule) setOne(v int, opt string, vals []string, prefix string) error {
	s, err := one(opt, vals)
	if err != nil {
		return err
	}
	if v == valProto {
		s = strings.ToLower(s) // lower-case input is returned as it is: still a span of the text
	}
	return r.setVal(v, prefix+s)
}

func (r *ipRule) setFlag(f ruleFlags, on bool) {
	if on {
		r.flags |= f
	} else {
		r.flags &^= f
	}
}

func (r *ipRule) set(opt string, vals []string, neg bool) error {
	not := ""
	if neg {
		not = "!"
	}
	var err error
	switch opt {
	case "-s", "--source", "--src":
		err = r.setOne(valSrc, opt, vals, "")
		r.setFlag(flSrcNeg, neg)
	case "-d", "--destination", "--dst":
		err = r.setOne(valDst, opt, vals, "")
		r.setFlag(flDstNeg, neg)
	case "-p", "--protocol":
		err = r.setOne(valProto, opt, vals, not)
	case "--dport", "--destination-port":
		err = r.setOne(valDport, opt, vals, not)
	case "--comment":
		err = r.setOne(valComment, opt, vals, "")
	case "-j", "--jump", "-g", "--goto":
		err = r.setOne(valTarget, opt, vals, "")
		r.tkind = classifyTarget(r.target())
	case "--to-destination":
		err = r.setOne(valToDest, opt, vals, "")
	case "--src-type":
		_, err = one(opt, vals)
		r.setFlag(flSrcType, true)
	case "--dst-type":
		var t string
		t, err = one(opt, vals)
		r.setFlag(flDstLocal, t == "LOCAL" && !neg)
	case "-m", "--match":
		var m string
		m, err = one(opt, vals)
		switch m {
		case "statistic":
			r.setFlag(flRandom, true)
		case "recent":
			r.setFlag(flRecent, true)
		}
	}
	// Every other option (and its values) does not change where Service
	// traffic goes: -i/-o, --ctstate, --mark, --nfacct-name, --probability,
	// --name/--rcheck/--set, --reject-with, --set-xmark, counters, ...
	return err
}

// targetKind classifies a jump target.
type targetKind uint8

const (
	targetNone  targetKind = iota // no target, or one that does not route (ACCEPT, MARK, ...)
	targetDNAT                    // DNAT --to-destination
	targetMark                    // KUBE-MARK-MASQ / KUBE-MARK-DROP
	targetSEP                     // a KUBE-SEP chain
	targetChain                   // another chain (or REJECT/DROP: checked by name)
)

func classifyTarget(t string) targetKind {
	switch {
	case t == "":
		return targetNone
	case t == "DNAT":
		return targetDNAT
	case isMarkChain(t):
		return targetMark
	case strings.HasPrefix(t, chainPrefixSEP):
		return targetSEP
	}
	return targetChain
}
