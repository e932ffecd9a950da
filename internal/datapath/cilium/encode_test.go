package cilium

import "encoding/binary"

// encodeService is decodeService's inverse; tests use it to write maps the
// way cilium-agent does.
func encodeService(e svcEntry) (k, v []byte) {
	a := e.Addr.AsSlice()
	k = make([]byte, len(a)+8)
	copy(k, a)
	rest := k[len(a):]
	binary.BigEndian.PutUint16(rest[0:2], e.Port)
	binary.NativeEndian.PutUint16(rest[2:4], e.Slot)
	rest[4], rest[5] = e.Proto, e.Scope
	v = make([]byte, 12)
	binary.NativeEndian.PutUint32(v[0:4], e.BackendID)
	binary.NativeEndian.PutUint16(v[4:6], e.Count)
	binary.BigEndian.PutUint16(v[6:8], e.RevNat)
	v[8], v[9] = e.Flags, e.Flags2
	binary.NativeEndian.PutUint16(v[10:12], e.QCount)
	return k, v
}

// encodeBackend is decodeBackend's inverse.
func encodeBackend(id uint32, b backendEntry) (k, v []byte) {
	k = binary.NativeEndian.AppendUint32(nil, id)
	a := b.Addr.AsSlice()
	v = make([]byte, len(a)+8)
	copy(v, a)
	rest := v[len(a):]
	binary.BigEndian.PutUint16(rest[0:2], b.Port)
	rest[2], rest[3] = b.Proto, b.State
	binary.NativeEndian.PutUint16(rest[4:6], b.ClusterID)
	rest[6] = b.Zone
	return k, v
}
