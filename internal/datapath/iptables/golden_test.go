package iptables

import (
	"path/filepath"
	"testing"

	"github.com/netdrift/netdrift/internal/testutil/fixture"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// checkGolden compares got with testdata/iptables/NAME, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	return fixture.Read(t, name)
}
