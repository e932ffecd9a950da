package iptables

import (
	"fmt"
	"strings"

	goiptables "github.com/coreos/go-iptables/iptables"
)

// Binary is one backend's iptables command in the agent's image: the
// commands whose -save variants the iptables-save read runs (detection,
// and the fallback when an in-process read fails). An older command than
// the one kube-proxy writes with may refuse or misprint newer rules, so
// its version is worth comparing with kube-proxy's image.
type Binary struct {
	Backend string // legacy or nft
	Path    string // "" when not found
	Version string // major.minor.patch, "" when Err is set
	Err     error  // why the command cannot be used
}

// String is "iptables-nft v1.8.9" or the error.
func (b Binary) String() string {
	if b.Err != nil {
		return fmt.Sprintf("iptables-%s: %v", b.Backend, b.Err)
	}
	return fmt.Sprintf("iptables-%s v%s", b.Backend, b.Version)
}

// ProbeBinaries finds iptables-nft and iptables-legacy and asks each for
// its version (go-iptables runs "<command> --version" and parses it). It
// only reads: no table is listed, so no legacy table is created.
func ProbeBinaries() []Binary {
	var out []Binary
	for _, backend := range []string{BackendNFT, BackendLegacy} {
		b := Binary{Backend: backend}
		b.Path, b.Err = findBinary("iptables-" + backend)
		if b.Err == nil {
			var ipt *goiptables.IPTables
			if ipt, b.Err = goiptables.New(goiptables.Path(b.Path)); b.Err == nil {
				v1, v2, v3 := ipt.GetIptablesVersion()
				b.Version = fmt.Sprintf("%d.%d.%d", v1, v2, v3)
			}
		}
		out = append(out, b)
	}
	return out
}

// BinariesSummary is the probe for the agent's status: each backend's
// command and version, and whether any can run.
func BinariesSummary(bins []Binary) (summary string, anyUsable bool) {
	parts := make([]string, 0, len(bins))
	for _, b := range bins {
		parts = append(parts, b.String())
		anyUsable = anyUsable || b.Err == nil
	}
	return strings.Join(parts, ", "), anyUsable
}

// CommandsReason adds the image's iptables commands and their versions to
// a datapath reason (/v1/status): the iptables-save read runs them, and one
// older than kube-proxy's may misread newer rules. note is set when none
// runs; summary is for the log.
func CommandsReason(reason string) (withCommands, note, summary string) {
	summary, usable := BinariesSummary(ProbeBinaries())
	if !usable {
		return reason, "no iptables command runs in the agent's image (" + summary +
			"): the iptables-save read (backend detection, fallback) is unavailable; use an image with the iptables package", summary
	}
	return reason + "; iptables commands: " + summary, "", summary
}
