package ipvs

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// ParseSave parses the output of `ipvsadm -Sn` (`ipvsadm-save -n`):
//
//	-A -t 10.0.0.1:80 -s rr
//	-a -t 10.0.0.1:80 -r 10.1.0.5:8080 -m -w 1
//
// Blank lines and lines starting with '#' are ignored. Addresses must be
// numeric (-n). Errors name the line. The Table has no link addresses.
//
// `ipvsadm -Ln` output (the listing people paste) is read too: it holds the
// same services, real servers, forwarding methods and weights.
func ParseSave(data []byte) (Table, error) {
	p := saveParser{index: map[svcKey]int{}}
	list := isListOutput(data)
	what := "ipvsadm save"
	if list {
		what = "ipvsadm -Ln"
	}
	var svc []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tok := strings.Fields(line)
		if list {
			var err error
			if tok, svc, err = listLine(tok, svc); err != nil {
				return Table{}, fmt.Errorf("%s line %d %q: %w (or capture `ipvsadm -Sn`)", what, n, clip(line), err)
			}
			if tok == nil {
				continue
			}
		} else if hint := notSaveHint(line); hint != "" {
			return Table{}, fmt.Errorf("%s line %d %q: %s", what, n, clip(line), hint)
		}
		if err := p.line(tok); err != nil {
			return Table{}, fmt.Errorf("%s line %d %q: %w", what, n, clip(line), err)
		}
	}
	if err := sc.Err(); err != nil {
		return Table{}, fmt.Errorf("ipvsadm save: %w", err)
	}
	return Table{Services: p.services}, nil
}

type svcKey struct {
	addr   netip.AddrPort
	proto  model.Protocol
	fwmark uint32
	fam    model.IPFamily
}

func keyOf(vs VirtualServer) svcKey {
	if vs.FWMark != 0 {
		return svcKey{fwmark: vs.FWMark, fam: vs.Family}
	}
	return svcKey{addr: vs.Addr, proto: vs.Protocol}
}

type saveParser struct {
	services []VirtualServer
	index    map[svcKey]int
}

// entry is one parsed line: a virtual server, and a real server for -a.
type entry struct {
	vs   VirtualServer
	real RealServer
	hasR bool
}

func (p *saveParser) line(tok []string) error {
	cmd := tok[0]
	e := entry{vs: VirtualServer{Family: model.IPv4}, real: RealServer{Forward: ForwardRoute, Weight: 1}}
	for i := 1; i < len(tok); i++ {
		n, err := e.option(tok, i)
		if err != nil {
			return err
		}
		i += n
	}
	if e.vs.FWMark == 0 && !e.vs.Addr.IsValid() {
		return fmt.Errorf("no virtual service (-t, -u, --sctp-service or -f)")
	}
	if e.vs.FWMark == 0 { // -6 only qualifies firewall marks
		e.vs.Family = model.FamilyOf(e.vs.Addr.Addr())
	}
	switch cmd {
	case "-A", "--add-service":
		return p.addService(e)
	case "-a", "--add-server":
		return p.addReal(e)
	}
	return fmt.Errorf("unknown command %q (want -A or -a)", cmd)
}

func (p *saveParser) addService(e entry) error {
	if e.hasR {
		return fmt.Errorf("-r given with -A")
	}
	if e.vs.Scheduler == "" {
		e.vs.Scheduler = "wlc" // ipvsadm's default
	}
	k := keyOf(e.vs)
	if _, dup := p.index[k]; dup {
		return fmt.Errorf("virtual server %s added twice", e.vs.ID())
	}
	p.index[k] = len(p.services)
	p.services = append(p.services, e.vs)
	return nil
}

func (p *saveParser) addReal(e entry) error {
	if !e.hasR {
		return fmt.Errorf("-a without -r real-server")
	}
	i, ok := p.index[keyOf(e.vs)]
	if !ok {
		return fmt.Errorf("real server for virtual server %s, which no earlier -A line adds", e.vs.ID())
	}
	vs := &p.services[i]
	if e.real.Addr.Port() == 0 { // ipvsadm: an omitted port is the service's
		e.real.Addr = netip.AddrPortFrom(e.real.Addr.Addr(), vs.Addr.Port())
	}
	for _, r := range vs.Reals {
		if r.Addr == e.real.Addr {
			return fmt.Errorf("real server %s added twice to %s", r.Addr, vs.ID())
		}
	}
	vs.Reals = append(vs.Reals, e.real)
	return nil
}

// option applies the option at tok[i] and returns how many value tokens it
// consumed.
func (e *entry) option(tok []string, i int) (int, error) {
	opt := tok[i]
	val := func() (string, error) {
		if i+1 >= len(tok) {
			return "", fmt.Errorf("option %s needs a value", opt)
		}
		return tok[i+1], nil
	}
	switch opt {
	case "-t", "--tcp-service", "-u", "--udp-service", "--sctp-service":
		v, err := val()
		if err != nil {
			return 0, err
		}
		return 1, e.service(opt, v)
	case "-f", "--fwmark-service":
		v, err := val()
		if err != nil {
			return 0, err
		}
		m, err := strconv.ParseUint(v, 10, 32)
		if err != nil || m == 0 {
			return 0, fmt.Errorf("bad firewall mark %q", v)
		}
		if e.vs.Addr.IsValid() || e.vs.FWMark != 0 {
			return 0, fmt.Errorf("more than one virtual service")
		}
		e.vs.FWMark = uint32(m)
		return 1, nil
	case "-6", "--ipv6":
		e.vs.Family = model.IPv6
		return 0, nil
	case "-r", "--real-server":
		v, err := val()
		if err != nil {
			return 0, err
		}
		a, err := parseAddrPort(v)
		if err != nil {
			return 0, fmt.Errorf("real server: %w", err)
		}
		e.real.Addr, e.hasR = a, true
		return 1, nil
	case "-w", "--weight":
		v, err := val()
		if err != nil {
			return 0, err
		}
		w, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("bad weight %q", v)
		}
		e.real.Weight = int(w)
		return 1, nil
	}
	return e.flagOption(tok, i)
}

// flagOption handles the options that do not change the observed state
// beyond evidence: scheduler, persistence, forwarding method, thresholds.
func (e *entry) flagOption(tok []string, i int) (int, error) {
	opt := tok[i]
	next := ""
	if i+1 < len(tok) {
		next = tok[i+1]
	}
	switch opt {
	case "-s", "--scheduler":
		if next == "" || strings.HasPrefix(next, "-") {
			return 0, fmt.Errorf("option %s needs a value", opt)
		}
		e.vs.Scheduler = next
		return 1, nil
	case "-p", "--persistent":
		e.vs.Persistent, e.vs.Timeout = true, 300 // ipvsadm's default timeout
		if t, err := strconv.ParseUint(next, 10, 32); err == nil {
			e.vs.Timeout = uint32(t)
			return 1, nil
		}
		return 0, nil
	case "-m", "--masquerading":
		e.real.Forward = ForwardMasq
		return 0, nil
	case "-g", "--gatewaying":
		e.real.Forward = ForwardRoute
		return 0, nil
	case "-i", "--ipip":
		e.real.Forward = ForwardTunnel
		return 0, nil
	case "-o", "--ops", "--tun-nocsum", "--tun-csum", "--tun-remcsum":
		return 0, nil
	case "-M", "--netmask", "--pe", "-b", "--sched-flags", "-x", "--u-threshold",
		"-y", "--l-threshold", "--tun-type", "--tun-port":
		if next == "" {
			return 0, fmt.Errorf("option %s needs a value", opt)
		}
		return 1, nil
	}
	return 0, fmt.Errorf("unknown option %q", opt)
}

func (e *entry) service(opt, v string) error {
	if e.vs.Addr.IsValid() || e.vs.FWMark != 0 {
		return fmt.Errorf("more than one virtual service")
	}
	a, err := parseAddrPort(v)
	if err != nil {
		return fmt.Errorf("virtual service: %w", err)
	}
	e.vs.Addr, e.vs.Family = a, model.FamilyOf(a.Addr())
	switch opt {
	case "-t", "--tcp-service":
		e.vs.Protocol = model.TCP
	case "-u", "--udp-service":
		e.vs.Protocol = model.UDP
	default:
		e.vs.Protocol = model.SCTP
	}
	return nil
}

// parseAddrPort accepts "1.2.3.4:80", "[fd00::1]:80" and, as ipvsadm does,
// an address without port (port 0).
func parseAddrPort(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil && a.Zone() == "" {
		return netip.AddrPortFrom(a.Unmap(), 0), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%q is not a numeric address[:port] (use ipvsadm -Sn)", s)
}

// notSaveHint names what to run when a line is not ipvsadm-save syntax but
// another capture's ("" when it may be ipvsadm-save).
func notSaveHint(line string) string {
	switch {
	case line[0] == '-' && len(line) > 1 && (line[1] == 'A' || line[1] == 'a'):
		return ""
	case line[0] == '*' || line[0] == ':' || strings.HasPrefix(line, "-N ") || strings.HasPrefix(line, "-P "):
		return "this is iptables output, not ipvsadm: pass it as --iptables-save, or capture `ipvsadm -Sn` for --ipvsadm-save"
	case line[0] == '{' || line[0] == '[':
		return "this is JSON (nft -j?), not ipvsadm: pass it as --nft-json, or capture `ipvsadm -Sn` for --ipvsadm-save"
	case strings.HasPrefix(line, "table ") || strings.HasPrefix(line, "chain "):
		return "this is `nft list` text, not ipvsadm: capture `ipvsadm -Sn`"
	}
	return ""
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
