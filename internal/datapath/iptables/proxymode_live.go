package iptables

import (
	"context"
	"fmt"
)

// RuleModes reads nat KUBE-SERVICES of the backend that holds kube-proxy's
// chains in a named network namespace ("" for the caller's), picked as the
// Reader's auto mode picks it, and reports whether the rules traffic meets
// there are iptables-mode rules and whether they are IPVS-mode rules (see
// ruleModes). It only reads: the legacy backend is asked only when its nat
// table already exists.
func RuleModes(ctx context.Context, netns string) (iptablesMode, ipvsMode bool, err error) {
	r := &runner{netns: netns}
	backend, _, nat, err := r.detect(ctx)
	if err != nil {
		return false, false, err
	}
	if len(nat) == 0 {
		return false, false, nil
	}
	d, err := parseDump(string(nat))
	if err != nil {
		return false, false, fmt.Errorf("iptables (%s backend) nat table: %w", backend, err)
	}
	iptablesMode, ipvsMode = ruleModes(d["nat"])
	return iptablesMode, ipvsMode, nil
}
