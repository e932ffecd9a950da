// Package cilium reads the Service state Cilium's kube-proxy replacement
// programs: the load-balancer maps cilium-agent pins under
// <bpffs>/tc/globals/. It reads them in process with cilium/ebpf and never
// writes them; it imports nothing of Cilium.
//
// The byte layouts below are those of Cilium's bpf/lib/lb.h (struct
// lb4_key, lb4_service, lb4_backend and their IPv6 twins), identical from
// Cilium v1.17.0 to v1.20.2. Cilium creates these maps from Go without BTF,
// so a map is recognised by its name, type and key and value sizes; any
// other layout is refused with what was found.
package cilium

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Map names, pinned under <bpffs>/tc/globals/. The suffix is the layout
// version: a Cilium that changes a layout changes the name.
const (
	services4Name = "cilium_lb4_services_v2"
	services6Name = "cilium_lb6_services_v2"
	backends4Name = "cilium_lb4_backends_v3"
	backends6Name = "cilium_lb6_backends_v3"
)

// mapLayout is what a map must be for this package to decode it.
type mapLayout struct {
	name      string
	typ       ebpf.MapType
	keySize   uint32
	valueSize uint32
}

var (
	services4Layout = mapLayout{services4Name, ebpf.Hash, 12, 12}
	services6Layout = mapLayout{services6Name, ebpf.Hash, 24, 12}
	backends4Layout = mapLayout{backends4Name, ebpf.Hash, 4, 12}
	backends6Layout = mapLayout{backends6Name, ebpf.Hash, 4, 24}
)

// check refuses a map whose type or sizes differ from the layout.
func (l mapLayout) check(typ ebpf.MapType, key, value uint32) error {
	if typ != l.typ || key != l.keySize || value != l.valueSize {
		return fmt.Errorf("map %s is %s with key %d B and value %d B; netdrift reads %s with key %d B and value %d B "+
			"(Cilium v1.17-v1.20 layout): this Cilium version is not supported", l.name, typ, key, value,
			l.typ, l.keySize, l.valueSize)
	}
	return nil
}

// Service flags (lb4_service.flags), from bpf/lib/lb.h.
const (
	flagExternalIP    = 1 << 0
	flagNodePort      = 1 << 1
	flagExtLocalScope = 1 << 2
	flagHostPort      = 1 << 3
	flagAffinity      = 1 << 4
	flagLoadBalancer  = 1 << 5
	flagSourceRange   = 1 << 7
)

// Service flags2.
const (
	flag2LocalRedirect  = 1 << 0
	flag2L7LoadBalancer = 1 << 2
	flag2IntLocalScope  = 1 << 4
	flag2TwoScopes      = 1 << 5
)

// Lookup scopes (lb4_key.scope).
const (
	scopeExternal = 0
	scopeInternal = 1
)

// Backend states (lb4_backend.flags).
const (
	stateActive      = 0
	stateTerminating = 1
	stateQuarantined = 2
	stateMaintenance = 3
)

// svcEntry is one key and value of a services map. Slot 0 is a frontend's
// master entry (Count selectable slots, then QCount parked ones); slot n > 0
// names the backend of that slot.
type svcEntry struct {
	Addr      netip.Addr
	Port      uint16
	Slot      uint16
	Proto     uint8
	Scope     uint8
	BackendID uint32 // slot > 0; on slot 0 the affinity timeout or L7 proxy port
	Count     uint16
	QCount    uint16
	RevNat    uint16
	Flags     uint8
	Flags2    uint8
}

// backendEntry is one value of a backends map.
type backendEntry struct {
	Addr      netip.Addr
	Port      uint16
	Proto     uint8
	State     uint8
	ClusterID uint16
	Zone      uint8
}

// decodeService decodes a services map key and value; the key is 12 bytes
// (IPv4) or 24 (IPv6).
func decodeService(k, v []byte) (svcEntry, error) {
	var e svcEntry
	if len(v) != 12 {
		return e, fmt.Errorf("service value of %d bytes, want 12", len(v))
	}
	var rest []byte
	switch len(k) {
	case 12:
		e.Addr = netip.AddrFrom4([4]byte(k[:4]))
		rest = k[4:]
	case 24:
		e.Addr = netip.AddrFrom16([16]byte(k[:16]))
		rest = k[16:]
	default:
		return e, fmt.Errorf("service key of %d bytes, want 12 or 24", len(k))
	}
	e.Port = binary.BigEndian.Uint16(rest[0:2])
	e.Slot = binary.NativeEndian.Uint16(rest[2:4])
	e.Proto, e.Scope = rest[4], rest[5]
	e.BackendID = binary.NativeEndian.Uint32(v[0:4])
	e.Count = binary.NativeEndian.Uint16(v[4:6])
	e.RevNat = binary.BigEndian.Uint16(v[6:8])
	e.Flags, e.Flags2 = v[8], v[9]
	e.QCount = binary.NativeEndian.Uint16(v[10:12])
	return e, nil
}

// decodeBackend decodes a backends map key (the backend id) and value: 12
// bytes (IPv4) or 24 (IPv6).
func decodeBackend(k, v []byte) (uint32, backendEntry, error) {
	var b backendEntry
	if len(k) != 4 {
		return 0, b, fmt.Errorf("backend key of %d bytes, want 4", len(k))
	}
	id := binary.NativeEndian.Uint32(k)
	var rest []byte
	switch len(v) {
	case 12:
		b.Addr = netip.AddrFrom4([4]byte(v[:4]))
		rest = v[4:]
	case 24:
		b.Addr = netip.AddrFrom16([16]byte(v[:16]))
		rest = v[16:]
	default:
		return 0, b, fmt.Errorf("backend value of %d bytes, want 12 or 24", len(v))
	}
	b.Port = binary.BigEndian.Uint16(rest[0:2])
	b.Proto, b.State = rest[2], rest[3]
	b.ClusterID = binary.NativeEndian.Uint16(rest[4:6])
	b.Zone = rest[6]
	return id, b, nil
}

// stateName names a backend state as Cilium's tools do.
func stateName(s uint8) string {
	switch s {
	case stateActive:
		return "active"
	case stateTerminating:
		return "terminating"
	case stateQuarantined:
		return "quarantined"
	case stateMaintenance:
		return "maintenance"
	}
	return fmt.Sprintf("state-%d", s)
}
