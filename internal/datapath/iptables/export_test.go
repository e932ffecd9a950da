//go:build linux

package iptables

// Test helpers for the external datapath_test package (drift tests that use
// internal/watch and internal/drift).
var (
	NewTestNetns   = newTestNetns
	RestoreInto    = restoreInto
	AddNFAcct      = addNFAcct
	RequireBackend = requireBackend
	ReadTestdata   = readTestdata
)
