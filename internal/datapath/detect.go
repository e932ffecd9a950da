package datapath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/netdrift/netdrift/internal/datapath/iptables"
	"github.com/netdrift/netdrift/internal/datapath/nftables"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
)

// IPVSServices counts IPVS virtual servers in a network namespace (given as
// a path, "" for the caller's). The real one talks generic netlink
// (github.com/moby/ipvs); tests on kernels without IPVS pass a fake.
type IPVSServices interface {
	CountServices(netnsPath string) (int, error)
}

// ModeDetector finds which datapath holds kube-proxy's state. The zero value
// is ready to use.
type ModeDetector struct {
	// IPVS counts virtual servers; nil means generic netlink, asked only
	// when the ip_vs module is loaded (asking would otherwise load it).
	IPVS IPVSServices
	// SysModuleDir is where loaded modules show (default /sys/module).
	SysModuleDir string
	// IPTablesLegacy is the iptables-legacy binary (default: found in PATH).
	IPTablesLegacy string
}

// DetectMode reports which of iptables, nftables and IPVS holds kube-proxy's
// state in the named network namespace ("" for the caller's), and why.
// Without any, the mode is model.ModeNone and the reason says so. It only
// reads: no rule, link or module is created.
func DetectMode(ctx context.Context, netns string) (mode, reason string, err error) {
	return ModeDetector{}.Detect(ctx, netns)
}

// detectFindings is what each probe found; "" means nothing.
type detectFindings struct {
	ipvs, nft, iptables string
	nftServices         int
}

// Detect is DetectMode with this detector's settings.
func (d ModeDetector) Detect(ctx context.Context, netns string) (string, string, error) {
	var f detectFindings
	var err error
	if f.ipvs, err = d.probeIPVS(ctx, netns); err != nil {
		return "", "", err
	}
	if f.nft, f.nftServices, err = nftables.ProbeTables(netns); err != nil {
		return "", "", err
	}
	if f.iptables, err = d.probeIPTables(ctx, netns); err != nil {
		return "", "", err
	}
	mode, reason := decideMode(f)
	return mode, reason, nil
}

// decideMode picks the mode from the probes. IPVS mode also keeps a
// KUBE-SERVICES chain in iptables, so IPVS evidence wins over iptables.
// kube-proxy removes the other modes' rules when it starts; if both
// nftables and iptables state remain, the one carrying services wins.
func decideMode(f detectFindings) (string, string) {
	switch {
	case f.ipvs != "":
		return model.ModeIPVS, f.ipvs
	case f.nft != "" && f.iptables != "":
		if f.nftServices > 0 {
			return model.ModeNFTables, f.nft + " (also found " + f.iptables + ", left over from another mode?)"
		}
		return model.ModeIPTables, f.iptables + " (also found " + f.nft + " without services)"
	case f.nft != "":
		return model.ModeNFTables, f.nft
	case f.iptables != "":
		return model.ModeIPTables, f.iptables
	}
	return model.ModeNone, "no kube-proxy state: no ip/ip6 kube-proxy nftables table, no KUBE-SERVICES chain in the " +
		"iptables nat table (legacy or nft backend), no IPVS virtual servers or IPVS-mode rules; " +
		"kube-proxy is not running or was replaced (e.g. by Cilium's kube-proxy replacement)"
}

// probeIPTables looks for KUBE-SERVICES in the nat table: over nf_tables
// netlink for the nft backend, with iptables-legacy for the legacy one.
func (d ModeDetector) probeIPTables(ctx context.Context, netns string) (string, error) {
	found, err := nftables.IPTablesKubeServices(netns)
	if err != nil {
		return "", err
	}
	if len(found) > 0 {
		return "KUBE-SERVICES chain in the " + strings.Join(found, " and ") + " nat table (iptables, nft backend)", nil
	}
	ok, err := d.legacyKubeServices(ctx, netns)
	if err != nil || !ok {
		return "", err
	}
	return "KUBE-SERVICES chain in the nat table (iptables, legacy backend)", nil
}

// legacyKubeServices asks iptables-legacy for KUBE-SERVICES, but only when
// the namespace already has a legacy nat table (asking would create one).
func (d ModeDetector) legacyKubeServices(ctx context.Context, netns string) (bool, error) {
	names, err := nsutil.ReadProcNet(netns, "ip_tables_names")
	if err != nil || !strings.Contains(names, "nat") {
		return false, nil // no legacy iptables in this kernel or netns
	}
	bin := d.IPTablesLegacy
	if bin == "" {
		if bin, err = exec.LookPath("iptables-legacy"); err != nil {
			return false, fmt.Errorf("%w: a legacy nat table exists but iptables-legacy is not installed", model.ErrUnsupported)
		}
	}
	args := []string{bin, "-w", "5", "-t", "nat", "-S", "KUBE-SERVICES"}
	if netns != "" {
		args = append([]string{"ip", "netns", "exec", netns}, args...)
	}
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err == nil {
		return true, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil // no such chain
	}
	return false, fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
}

// probeIPVS reports IPVS virtual servers, or IPVS-mode rules in nat
// KUBE-SERVICES beside a kube-ipvs0 link. The link alone is no evidence: a
// node whose kube-proxy moved from IPVS to iptables or nftables mode keeps
// it, so its rules decide (iptables.RuleModes, as the offline parse does).
func (d ModeDetector) probeIPVS(ctx context.Context, netns string) (string, error) {
	n, err := d.countIPVS(netns)
	if err != nil || n > 0 {
		return fmt.Sprintf("%d IPVS virtual servers", n), err
	}
	ok, err := linkExistsInNetns(netns, "kube-ipvs0")
	if err != nil || !ok {
		return "", err
	}
	iptablesMode, ipvsMode, err := iptables.RuleModes(ctx, netns)
	if errors.Is(err, model.ErrUnsupported) {
		return "", nil // no iptables command to read the rules with: the link alone decides nothing
	}
	if err != nil {
		return "", fmt.Errorf("link kube-ipvs0 exists; reading nat KUBE-SERVICES to tell whether kube-proxy runs in IPVS mode: %w", err)
	}
	if ipvsMode && !iptablesMode {
		return "link kube-ipvs0 and IPVS-mode rules in nat KUBE-SERVICES (kube-proxy IPVS mode)", nil
	}
	return "", nil
}

// countIPVS counts IPVS virtual servers; 0 when the ip_vs module is not
// loaded (asking would load it).
func (d ModeDetector) countIPVS(netns string) (int, error) {
	counter := d.IPVS
	if counter == nil {
		dir := d.SysModuleDir
		if dir == "" {
			dir = "/sys/module"
		}
		if _, err := os.Stat(filepath.Join(dir, "ip_vs")); err != nil {
			return 0, nil // IPVS not loaded: no virtual servers can exist
		}
		counter = netlinkIPVS{}
	}
	n, err := counter.CountServices(nsutil.Path(netns))
	if err != nil {
		return 0, fmt.Errorf("ipvs: %w", err)
	}
	return n, nil
}
