package nfevents

import (
	"testing"

	"github.com/mdlayher/netlink"
)

// FuzzParseChangeMessage: netlink notifications never panic the decoder.
func FuzzParseChangeMessage(f *testing.F) {
	f.Add(uint16(nfnlSubsysNFTables<<8|nftMsgNewGen), []byte{0, 0, 0, 5, 8, 0, 1, 0, 0, 0, 0, 7})
	f.Add(uint16(nfnlSubsysNFTables<<8|nftMsgNewRule), []byte{2, 0, 0, 0, 15, 0, 1, 0, 'k', 'u', 'b', 'e', '-', 'p', 'r', 'o', 'x', 'y', 0, 0})
	f.Add(uint16(nfnlSubsysNFTables<<8|nftMsgDelSetElem), []byte{10, 0})
	f.Fuzz(func(t *testing.T, typ uint16, data []byte) {
		_, _, _, _ = parseChangeMessage(netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(typ)}, Data: data})
	})
}
