package iptables

// The native expressions a rule's builder reads, decoded in place into the
// github.com/google/nftables/expr types (whose own decoders allocate a
// netlink decoder and copy each attribute twice). Attribute numbers:
// include/uapi/linux/netfilter/nf_tables.h; values are big endian.

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

func beAttrs(data []byte) (nlAttrs, error) {
	ad, err := newAttrs(data)
	ad.ByteOrder = binary.BigEndian
	return ad, err
}

func decodePayload(data []byte) (expr.Payload, error) {
	var e expr.Payload
	ad, err := beAttrs(data)
	if err != nil {
		return e, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_PAYLOAD_DREG:
			e.DestRegister = ad.Uint32()
		case unix.NFTA_PAYLOAD_SREG:
			e.SourceRegister, e.OperationType = ad.Uint32(), expr.PayloadWrite
		case unix.NFTA_PAYLOAD_BASE:
			e.Base = expr.PayloadBase(ad.Uint32())
		case unix.NFTA_PAYLOAD_OFFSET:
			e.Offset = ad.Uint32()
		case unix.NFTA_PAYLOAD_LEN:
			e.Len = ad.Uint32()
		}
	}
	return e, ad.Err()
}

func decodeMeta(data []byte) (expr.Meta, error) {
	var e expr.Meta
	ad, err := beAttrs(data)
	if err != nil {
		return e, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_META_SREG:
			e.Register, e.SourceRegister = ad.Uint32(), true
		case unix.NFTA_META_DREG:
			e.Register = ad.Uint32()
		case unix.NFTA_META_KEY:
			e.Key = expr.MetaKey(ad.Uint32())
		}
	}
	return e, ad.Err()
}

// decodeCmp: Data is in place (valid as long as the message).
func decodeCmp(data []byte) (expr.Cmp, error) {
	var e expr.Cmp
	ad, err := beAttrs(data)
	if err != nil {
		return e, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_CMP_SREG:
			e.Register = ad.Uint32()
		case unix.NFTA_CMP_OP:
			e.Op = expr.CmpOp(ad.Uint32())
		case unix.NFTA_CMP_DATA:
			e.Data = dataValue(ad.Bytes())
		}
	}
	return e, ad.Err()
}

// decodeImmediate returns an immediate's destination register and, for
// the verdict register, its verdict.
func decodeImmediate(data []byte) (uint32, expr.Verdict, error) {
	var dreg uint32
	var v expr.Verdict
	ad, err := beAttrs(data)
	if err != nil {
		return 0, v, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_IMMEDIATE_DREG:
			dreg = ad.Uint32()
		case unix.NFTA_IMMEDIATE_DATA:
			if err := decodeVerdictData(ad.Bytes(), &v); err != nil {
				return 0, v, err
			}
		}
	}
	return dreg, v, ad.Err()
}

// decodeVerdictData reads NFTA_DATA_VERDICT out of an NFTA_DATA nest.
func decodeVerdictData(data []byte, v *expr.Verdict) error {
	ad, err := beAttrs(data)
	if err != nil {
		return err
	}
	for ad.Next() {
		if ad.Type() != unix.NFTA_DATA_VERDICT {
			continue
		}
		vd, err := beAttrs(ad.Bytes())
		if err != nil {
			return err
		}
		for vd.Next() {
			switch vd.Type() {
			case unix.NFTA_VERDICT_CODE:
				v.Kind = expr.VerdictKind(int32(vd.Uint32()))
			case unix.NFTA_VERDICT_CHAIN:
				v.Chain = vd.String()
			}
		}
		if vd.Err() != nil {
			return vd.Err()
		}
	}
	return ad.Err()
}
