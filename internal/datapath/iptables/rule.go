package iptables

import (
	"fmt"
	"strings"
)

// ipRule is the part of one iptables rule that matters for Service
// traffic. Strings are substrings of the dump where possible.
type ipRule struct {
	chain    string
	text     string // the rule line as it appeared
	src      string // -s value ("" if none)
	srcNeg   bool
	dst      string // -d value
	dstNeg   bool
	proto    string     // -p value, lower case as written
	dport    string     // --dport value
	comment  string     // --comment (unquoted)
	target   string     // -j / -g value; "" when the rule has no target
	toDest   string     // DNAT --to-destination
	srcType  bool       // addrtype --src-type (any type: the rule is source-conditional)
	dstLocal bool       // addrtype --dst-type LOCAL (not negated)
	tkind    targetKind // the target, classified while the line is in cache
	random   bool       // -m statistic
	recent   bool       // -m recent
}

// unconditional reports whether a rule matches every packet that reaches
// it (no address, protocol, port, address-type or statistic match).
func (r *ipRule) unconditional() bool {
	return r.src == "" && r.dst == "" && r.proto == "" && r.dport == "" && !r.srcType && !r.dstLocal && !r.random && !r.recent
}

// sourceConditional reports whether the rule only matches some sources.
func (r *ipRule) sourceConditional() bool {
	return r.src != "" || r.srcType
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

func (r *ipRule) set(opt string, vals []string, neg bool) error {
	var err error
	switch opt {
	case "-s", "--source", "--src":
		r.src, err = one(opt, vals)
		r.srcNeg = neg
	case "-d", "--destination", "--dst":
		r.dst, err = one(opt, vals)
		r.dstNeg = neg
	case "-p", "--protocol":
		r.proto, err = one(opt, vals)
		r.proto = strings.ToLower(r.proto)
		if neg {
			r.proto = "!" + r.proto
		}
	case "--dport", "--destination-port":
		r.dport, err = one(opt, vals)
		if neg {
			r.dport = "!" + r.dport
		}
	case "--comment":
		r.comment, err = one(opt, vals)
	case "-j", "--jump", "-g", "--goto":
		r.target, err = one(opt, vals)
		r.tkind = classifyTarget(r.target)
	case "--to-destination":
		r.toDest, err = one(opt, vals)
	case "--src-type":
		_, err = one(opt, vals)
		r.srcType = true
	case "--dst-type":
		var t string
		t, err = one(opt, vals)
		r.dstLocal = t == "LOCAL" && !neg
	case "-m", "--match":
		var m string
		m, err = one(opt, vals)
		switch m {
		case "statistic":
			r.random = true
		case "recent":
			r.recent = true
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
