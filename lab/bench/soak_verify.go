package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
	"github.com/netdrift/netdrift/lab/scenarios"
)

// A soak's stale findings are checked against the kernel: a finding the
// agent reports is true when kube-proxy is late (its own histogram says
// how often it is, Window.ProxyLate), false when the rules say otherwise.
// Right after a sample with findings the harness reads kube-proxy's rules
// in the node's namespace with the reference tool (nftables: the table;
// iptables: the chains of up to chainCheckMax findings, staleVerifier.read)
// and asks the agent again 1 s after the read. Per finding of a kind it can check
// (stale_backend: the service's frontend still forwards to the backend;
// missing_backend: it does not):
//   - confirmed: the dump agrees with the finding;
//   - false: the dump contradicts it and either no commit touched
//     kube-proxy's table between the time the answer's view is as of and
//     the dump's end (the harness's own nf_tables listener), or the agent
//     still reports it after the dump from a view as of after the dump;
//   - fixed meanwhile: the dump contradicts it, kube-proxy committed in
//     between, and the agent no longer reports it.
// An answer's view is as of the time it was asked, or, when it says it
// trails the kernel (view.datapath_behind_since), as of the first commit it
// has not read. Answers whose view is not current state no finding: they
// are counted (SoakPoint.NoView), not checked. A dump costs seconds of CPU
// at 100k endpoints in iptables-nft (kube-proxy's CPU too): findings are
// checked at most every checkEvery.
// Endpoint addresses are never reused in the churn (Cluster.ChangeOne), so
// a backend still programmed after the answer was programmed at it.

// soakFinding is one finding of /v1/drift, as the soak reads it.
type soakFinding struct {
	Kind     string `json:"kind"`
	Service  string `json:"service"`
	Protocol string `json:"protocol"`
	Frontend string `json:"frontend"`
	Backend  string `json:"backend"`
}

func (f soakFinding) String() string {
	return fmt.Sprintf("%s %s %s %s", f.Kind, f.Service, f.Frontend, f.Backend)
}

// soakView is an answer's view object, as the soak reads it.
type soakView struct {
	Current       bool      `json:"current"`
	Code          string    `json:"code"`
	BehindCommits int       `json:"datapath_behind_commits"`
	BehindSince   time.Time `json:"datapath_behind_since"`
}

// asOf is the time an answer asked at is as of: asked, or the first
// commit the agent said its view had not read yet.
func (v soakView) asOf(asked time.Time) time.Time {
	if !v.BehindSince.IsZero() && v.BehindSince.Before(asked) {
		return v.BehindSince.Add(-time.Millisecond)
	}
	return asked
}

// checkEvery is the least time between two checks (two dumps).
const checkEvery = 90 * time.Second

// StaleCheck is one sample's findings checked against the kernel.
type StaleCheck struct {
	Confirmed, False, Fixed int
	Unchecked               int      // findings of kinds the rules alone cannot check
	Skipped                 int      // findings past chainCheckMax, not checked
	Commits                 int      // commits to kube-proxy's table between the answer and the dump's end; -1: no listener
	Examples                []string // up to three false findings
	Err                     string   // the check could not run
}

// staleVerifier checks a sample's findings (soakSampler).
type staleVerifier struct {
	lab   *labenv.Lab
	mode  string
	agent *scenarios.Agent
	mon   *Monitor  // nil: no commit record
	last  time.Time // the last check
}

// due says whether a check may run now (at most every checkEvery).
func (v *staleVerifier) due() bool {
	if time.Since(v.last) < checkEvery {
		return false
	}
	v.last = time.Now()
	return true
}

// check checks findings the agent gave in an answer requested at asked,
// whose view was view.
func (v *staleVerifier) check(ctx context.Context, findings []soakFinding, view soakView, asked time.Time) *StaleCheck {
	c := &StaleCheck{Commits: -1}
	if v.mode != "nftables" && len(findings) > chainCheckMax {
		c.Skipped = len(findings) - chainCheckMax
		findings = findings[:chainCheckMax]
	}
	idx, err := v.read(ctx, findings)
	dumped := time.Now()
	if err != nil {
		c.Err = err.Error()
		return c
	}
	time.Sleep(time.Second)
	var again struct {
		View     soakView      `json:"view"`
		Findings []soakFinding `json:"findings"`
	}
	if err := v.agent.Get(ctx, "/v1/drift", &again); err != nil {
		c.Err = "asking again: " + err.Error()
		return c
	}
	still := map[soakFinding]bool{}
	if again.View.Current && !again.View.asOf(dumped.Add(time.Second)).Before(dumped) {
		for _, f := range again.Findings {
			still[f] = true
		}
	}
	if v.mon != nil {
		c.Commits = 0
		from := view.asOf(asked)
		for _, cm := range v.mon.Commits() {
			if cm.At.After(from) && !cm.At.After(dumped) && cm.Touches(ProxyTables(v.mode)) {
				c.Commits++
			}
		}
	}
	for _, f := range findings {
		var ok bool
		switch f.Kind {
		case "stale_backend":
			ok = idx.holds(f.Frontend, f.Protocol, f.Backend)
		case "missing_backend":
			ok = !idx.holds(f.Frontend, f.Protocol, f.Backend)
		default:
			c.Unchecked++
			continue
		}
		switch {
		case ok:
			c.Confirmed++
		case still[f] || c.Commits == 0:
			c.False++
			if len(c.Examples) < 3 {
				c.Examples = append(c.Examples, f.String())
			}
		default:
			c.Fixed++
		}
	}
	return c
}

// chainCheckMax is how many findings of one sample the iptables modes
// check: each costs a listing of its service's chains.
const chainCheckMax = 8

// read reads what the findings need of kube-proxy's IPv4 NAT rules in the
// node's namespace, with the reference tool: nftables, the whole table
// (`nft list table`, about 5 s of CPU at 100k); iptables, the chains
// from KUBE-SERVICES down to the findings' DNAT rules, one `iptables -S`
// per chain. A whole `iptables-nft-save -t nat` takes 5-10 s at 100k, over
// which kube-proxy commits again: no finding could be confirmed or refuted.
func (v *staleVerifier) read(ctx context.Context, findings []soakFinding) (ruleIndex, error) {
	ns, err := v.lab.NodeNetNS(node)
	if err != nil {
		return nil, err
	}
	run := func(args ...string) ([]byte, error) {
		out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...).Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
		return out, nil
	}
	if v.mode == "nftables" {
		out, err := run("nft", "list", "table", "ip", "kube-proxy")
		if err != nil {
			return nil, err
		}
		return indexNFT(out), nil
	}
	ipt := "iptables-" + Modes[v.mode].Backend
	return readIPTChains(findings, func(chain string) ([]byte, error) { return run(ipt, "-t", "nat", "-S", chain) })
}

// readIPTChains indexes the chains the findings' frontends lead to, listed
// by list: KUBE-SERVICES, then each chain its rules for those frontends
// jump to, to iptIndex.holds's depth.
func readIPTChains(findings []soakFinding, list func(chain string) ([]byte, error)) (*iptIndex, error) {
	x := newIPTIndex()
	out, err := list("KUBE-SERVICES")
	if err != nil {
		return nil, err
	}
	x.add(out)
	read := map[string]bool{"KUBE-SERVICES": true}
	var next []string
	for _, f := range findings {
		next = append(next, x.services[f.Frontend+"/"+strings.ToLower(f.Protocol)]...)
	}
	for depth := 0; depth < iptDepth && len(next) > 0; depth++ {
		var more []string
		for _, ch := range next {
			if read[ch] || !serviceChain(ch) {
				continue
			}
			read[ch] = true
			out, err := list(ch)
			if err != nil {
				return nil, err
			}
			x.add(out)
			more = append(more, x.jumps[ch]...)
		}
		next = more
	}
	return x, nil
}

// ruleIndex answers which backends a frontend forwards to in a dump.
type ruleIndex interface {
	holds(frontend, protocol, backend string) bool
}

// iptIndex is iptables-save's nat table: KUBE-SERVICES' jumps by
// destination, every chain's jumps, and the DNAT destinations.
type iptIndex struct {
	services map[string][]string // "ip:port/proto" -> targets
	jumps    map[string][]string
	dnat     map[string][]string
}

func newIPTIndex() *iptIndex {
	return &iptIndex{services: map[string][]string{}, jumps: map[string][]string{}, dnat: map[string][]string{}}
}

func indexIPT(dump []byte) *iptIndex {
	x := newIPTIndex()
	x.add(dump)
	return x
}

// add indexes the -A lines of iptables-save or iptables -S output.
func (x *iptIndex) add(dump []byte) {
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != "-A" {
			continue
		}
		chain, target := f[1], flagValue(f, "-j")
		switch {
		case target == "DNAT":
			x.dnat[chain] = append(x.dnat[chain], flagValue(f, "--to-destination"))
		case chain == "KUBE-SERVICES" && flagValue(f, "-d") != "":
			fe := strings.TrimSuffix(flagValue(f, "-d"), "/32") + ":" + flagValue(f, "--dport") + "/" + strings.ToLower(flagValue(f, "-p"))
			x.services[fe] = append(x.services[fe], target)
		case target != "":
			x.jumps[chain] = append(x.jumps[chain], target)
		}
	}
}

func flagValue(f []string, flag string) string {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == flag {
			return f[i+1]
		}
	}
	return ""
}

// serviceChain: a chain of kube-proxy's per-service or per-endpoint
// families, which a frontend's jumps can lead to a DNAT through
// (KUBE-MARK-MASQ and the like are not followed).
func serviceChain(ch string) bool {
	for _, p := range []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"} {
		if strings.HasPrefix(ch, p) {
			return true
		}
	}
	return false
}

// iptDepth is how many chains deep holds follows a frontend's jumps
// (KUBE-EXT, KUBE-SVC, KUBE-SEP: three).
const iptDepth = 4

func (x *iptIndex) holds(frontend, protocol, backend string) bool {
	seen := map[string]bool{}
	next := x.services[frontend+"/"+strings.ToLower(protocol)]
	for depth := 0; depth < iptDepth && len(next) > 0; depth++ {
		var more []string
		for _, ch := range next {
			if seen[ch] {
				continue
			}
			seen[ch] = true
			for _, d := range x.dnat[ch] {
				if d == backend {
					return true
				}
			}
			more = append(more, x.jumps[ch]...)
		}
		next = more
	}
	return false
}

// nftIndex is `nft list table ip kube-proxy`: the service-ips map's
// frontends and the endpoint chains each service chain names.
type nftIndex struct {
	services  map[string]string          // "ip:port/proto" -> service chain
	endpoints map[string]map[string]bool // service chain -> backends "ip:port"
}

var (
	nftElem     = regexp.MustCompile(`([0-9.]+) \. (tcp|udp|sctp) \. ([0-9]+) : goto (service-[^\s,}]+)`)
	nftEndpoint = regexp.MustCompile(`endpoint-[^\s,}]+__([0-9.]+)/([0-9]+)`)
)

func indexNFT(dump []byte) *nftIndex {
	x := &nftIndex{services: map[string]string{}, endpoints: map[string]map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	chain := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, ok := strings.CutPrefix(line, "chain "); ok {
			chain = strings.TrimSuffix(name, " {")
			continue
		}
		if line == "}" {
			chain = ""
			continue
		}
		for _, m := range nftElem.FindAllStringSubmatch(line, -1) {
			x.services[m[1]+":"+m[3]+"/"+m[2]] = m[4]
		}
		if strings.HasPrefix(chain, "service-") {
			for _, m := range nftEndpoint.FindAllStringSubmatch(line, -1) {
				if x.endpoints[chain] == nil {
					x.endpoints[chain] = map[string]bool{}
				}
				x.endpoints[chain][m[1]+":"+m[2]] = true
			}
		}
	}
	return x
}

func (x *nftIndex) holds(frontend, protocol, backend string) bool {
	return x.endpoints[x.services[frontend+"/"+strings.ToLower(protocol)]][backend]
}
