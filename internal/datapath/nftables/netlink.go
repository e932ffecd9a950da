package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"

	"github.com/netdrift/netdrift/internal/model"
)

// nftNetlinkReader reads one kube-proxy table over netlink into the same
// intermediate form the JSON parser produces. It reads only the maps the
// reader needs and the chains reachable from them, one chain per request.
type nftNetlinkReader struct {
	conn  *nftables.Conn
	table *nftables.Table
	t     *nftTable
	reads *int // counts chain and set requests to the kernel, if not nil
	// sets, when not nil, answers for the kernel: the message path reduces
	// a rule's anonymous sets from the transaction's messages.
	sets func(name string) ([]nftables.SetElement, bool, error)
}

func (r *nftNetlinkReader) counted() {
	if r.reads != nil {
		*r.reads++
	}
}

// nftReadNetlink returns the table of the given family, or nil if absent.
// reads, when not nil, counts the chain and set requests.
func nftReadNetlink(ctx context.Context, conn *nftables.Conn, fam model.IPFamily, reads *int) (*nftTable, error) {
	tf := nftables.TableFamilyIPv4
	if fam == model.IPv6 {
		tf = nftables.TableFamilyIPv6
	}
	tables, err := conn.ListTablesOfFamily(tf)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var table *nftables.Table
	for _, tb := range tables {
		if tb.Name == nftTableName {
			table = tb
		}
	}
	if table == nil {
		return nil, nil
	}
	r := &nftNetlinkReader{conn: conn, table: table, t: newNFTTable(fam), reads: reads}
	if err := r.readMaps(); err != nil {
		return nil, err
	}
	if err := r.readReachable(ctx, r.roots()); err != nil {
		return nil, err
	}
	return r.t, nil
}

// nftIsNotFound reports ENOENT; the library flattens some errors to text.
func nftIsNotFound(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOENT) || strings.Contains(err.Error(), syscall.ENOENT.Error()))
}

// elements returns a set's elements; ok is false when the set does not exist.
func (r *nftNetlinkReader) elements(name string) ([]nftables.SetElement, bool, error) {
	if r.sets != nil {
		return r.sets(name)
	}
	r.counted()
	els, err := r.conn.GetSetElements(&nftables.Set{Table: r.table, Name: name})
	if nftIsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("set %s: %w", name, err)
	}
	return els, true, nil
}

func (r *nftNetlinkReader) addrLen() int {
	if r.t.Family == model.IPv6 {
		return 16
	}
	return 4
}

func (r *nftNetlinkReader) readMaps() error {
	for _, name := range nftReaderMaps {
		if err := r.readMap(name); err != nil {
			return err
		}
	}
	return r.readClusterIPs()
}

// readMap reads one of the reader's verdict maps (absent maps stay absent).
func (r *nftNetlinkReader) readMap(name string) error {
	els, ok, err := r.elements(name)
	if err != nil || !ok {
		return err
	}
	out, err := r.mapElems(name, els, true)
	if err != nil {
		return err
	}
	r.t.Maps[name] = out
	return nil
}

// mapElems reduces elements of the verdict map name; verdicts false: keys
// only (a DELSETELEM message may carry no data).
func (r *nftNetlinkReader) mapElems(name string, els []nftables.SetElement, verdicts bool) ([]nftElem, error) {
	nodePort := name == nftMapServiceNodePorts || name == nftMapNoEndpointNPs
	out := make([]nftElem, 0, len(els))
	for _, el := range els {
		key, err := r.decodeKey(el.Key, nodePort)
		if err != nil {
			return nil, fmt.Errorf("map %s: %w", name, err)
		}
		var v nftVerdict
		if verdicts {
			if v, err = nftElemVerdict(el); err != nil {
				return nil, fmt.Errorf("map %s element %v: %w", name, key, err)
			}
		}
		out = append(out, nftElem{Key: key, Verdict: v, Comment: el.Comment})
	}
	return out, nil
}

// clusterIP is a cluster-ips element's address; ok false for another length.
func (r *nftNetlinkReader) clusterIP(el nftables.SetElement) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(el.Key)
	return a.Unmap(), ok && len(el.Key) == r.addrLen()
}

func (r *nftNetlinkReader) readClusterIPs() error {
	els, ok, err := r.elements(nftSetClusterIPs)
	if err != nil {
		return err
	}
	r.t.HasClusterIPSet = ok
	r.t.ClusterIPs = map[netip.Addr]bool{}
	for _, el := range els {
		if a, ok := r.clusterIP(el); ok {
			r.t.ClusterIPs[a] = true
		}
	}
	return nil
}

// decodeKey renders a map key (addr . proto . port, or proto . port; each
// part padded to 4 bytes) the way nft prints it.
func (r *nftNetlinkReader) decodeKey(b []byte, nodePort bool) ([]string, error) {
	var parts []string
	if !nodePort {
		n := r.addrLen()
		if len(b) < n {
			return nil, fmt.Errorf("key %x too short", b)
		}
		a, _ := netip.AddrFromSlice(b[:n])
		parts = append(parts, a.String())
		b = b[n:]
	}
	if len(b) != 8 {
		return nil, fmt.Errorf("key %x: want proto . port", b)
	}
	return append(parts, nftProtoName(b[0]), strconv.Itoa(int(binary.BigEndian.Uint16(b[4:6])))), nil
}

func nftProtoName(p byte) string {
	switch p {
	case syscall.IPPROTO_TCP:
		return "tcp"
	case syscall.IPPROTO_UDP:
		return "udp"
	case 132:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// nftElemVerdict returns a verdict map element's verdict. The library
// leaves it undecoded in Val (the NFTA_DATA_VERDICT attributes).
func nftElemVerdict(el nftables.SetElement) (nftVerdict, error) {
	if el.VerdictData != nil {
		return nftVerdictOf(el.VerdictData), nil
	}
	ad, err := netlink.NewAttributeDecoder(el.Val)
	if err != nil {
		return nftVerdict{}, fmt.Errorf("verdict: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	v := &expr.Verdict{}
	haveCode := false
	for ad.Next() {
		switch ad.Type() {
		case 1: // NFTA_VERDICT_CODE
			v.Kind = expr.VerdictKind(int32(ad.Uint32()))
			haveCode = true
		case 2: // NFTA_VERDICT_CHAIN
			v.Chain = ad.String()
		}
	}
	if err := ad.Err(); err != nil || !haveCode {
		return nftVerdict{}, fmt.Errorf("element has no verdict (data %x)", el.Val)
	}
	return nftVerdictOf(v), nil
}

func nftVerdictOf(v *expr.Verdict) nftVerdict {
	switch v.Kind {
	case expr.VerdictGoto:
		return nftVerdict{Kind: nftVerdictGoto, Target: v.Chain}
	case expr.VerdictJump:
		return nftVerdict{Kind: nftVerdictJump, Target: v.Chain}
	case expr.VerdictDrop:
		return nftVerdict{Kind: nftVerdictDrop}
	case expr.VerdictAccept:
		return nftVerdict{Kind: nftVerdictAccept}
	case expr.VerdictReturn:
		return nftVerdict{Kind: nftVerdictReturn}
	}
	return nftVerdict{Kind: nftVerdictContinue}
}

// roots are where the walk of a full read starts: the services chain and
// every map target.
func (r *nftNetlinkReader) roots() []string {
	queue := []string{"services"}
	for _, els := range r.t.Maps {
		for _, el := range els {
			queue = append(queue, el.Verdict.Target)
		}
	}
	return queue
}

// readReachable walks from the given chains to every chain they reach,
// reading those not read yet (all of them on a full read; only newly
// referenced ones on an incremental refresh, which starts from what it
// re-read: the rest of the table is known and unchanged).
func (r *nftNetlinkReader) readReachable(ctx context.Context, queue []string) error {
	seen := map[string]bool{}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		rules, cached := r.t.Chains[name]
		if !cached {
			if err := ctx.Err(); err != nil {
				return err
			}
			var ok bool
			var err error
			if rules, ok, err = r.readChain(name); err != nil {
				return err
			} else if !ok {
				continue
			}
			r.t.Chains[name] = rules
		}
		for _, rl := range rules {
			queue = append(queue, rl.Verdict.Target)
			for _, v := range rl.VMap {
				queue = append(queue, v.Target)
			}
		}
	}
	return nil
}

// refresh re-reads the named sets and chains of a cached table (what a
// change event names), then reads chains that became reachable.
func (r *nftNetlinkReader) refresh(ctx context.Context, sets, chains []string) error {
	var roots []string
	for _, s := range sets {
		switch {
		case isNFTReaderMap(s):
			delete(r.t.Maps, s)
			if err := r.readMap(s); err != nil {
				return err
			}
			for _, el := range r.t.Maps[s] {
				roots = append(roots, el.Verdict.Target)
			}
		case s == nftSetClusterIPs:
			if err := r.readClusterIPs(); err != nil {
				return err
			}
		}
	}
	for _, c := range chains {
		if _, cached := r.t.Chains[c]; !cached && c != "services" {
			continue // not reachable before; the walk reads it if it is now
		}
		rules, ok, err := r.readChain(c)
		if err != nil {
			return err
		}
		if ok {
			r.t.Chains[c] = rules
			roots = append(roots, c)
		} else {
			delete(r.t.Chains, c)
		}
	}
	return r.readReachable(ctx, roots)
}

// readChain reads one chain's rules; ok is false when the chain does not exist.
func (r *nftNetlinkReader) readChain(name string) ([]nftRule, bool, error) {
	r.counted()
	nrs, err := r.conn.GetRules(r.table, &nftables.Chain{Name: name, Table: r.table})
	if nftIsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("chain %s: %w", name, err)
	}
	rules := make([]nftRule, 0, len(nrs))
	for _, nr := range nrs {
		rl, err := r.convertRule(nr)
		if err != nil {
			return nil, false, fmt.Errorf("chain %s rule %d: %w", name, nr.Handle, err)
		}
		rules = append(rules, rl)
	}
	return rules, true, nil
}
