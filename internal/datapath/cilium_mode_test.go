package datapath

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
)

func TestDetectCilium(t *testing.T) {
	dir := t.TempDir()
	if _, ok := DetectCilium(dir); ok {
		t.Fatal("an empty directory detected as Cilium")
	}
	if err := os.MkdirAll(filepath.Join(dir, "tc", "globals"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tc", "globals", "cilium_lb4_services_v2"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	why, ok := DetectCilium(dir)
	if !ok || !strings.Contains(why, "cilium_lb4_services_v2") {
		t.Fatalf("pinned services map not detected: %q %v", why, ok)
	}
	// --datapath set: no detection at all.
	mode, reason, err := ResolveWithCilium(context.Background(), model.ModeNFTables, "", dir)
	if err != nil || mode != model.ModeNFTables || reason != "set by --datapath" {
		t.Errorf("explicit mode: %s %q %v", mode, reason, err)
	}
}

func TestSemanticsOnlyForCilium(t *testing.T) {
	for _, m := range []string{model.ModeIPTables, model.ModeNFTables, model.ModeIPVS, model.ModeNone} {
		if Semantics(m, false) != nil {
			t.Errorf("%s: kube-proxy's own semantics must not be adjusted", m)
		}
	}
	if Semantics(model.ModeCilium, false) == nil {
		t.Error("cilium: no semantics")
	}
	if _, err := ParseMode("cilium"); err != nil {
		t.Error(err)
	}
}
