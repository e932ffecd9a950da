package rst

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/netdrift/netdrift/bpf"
)

// TestCORERelocations resolves every CO-RE relocation of the fentry programs
// against kernel BTF (the running kernel's, or the vmlinux/BTF file named by
// NETDRIFT_RST_BTF) without loading anything: a field the kernel lacks shows up
// here instead of as a poisoned instruction at load time.
func TestCORERelocations(t *testing.T) {
	var target *btf.Spec
	var err error
	if f := os.Getenv("NETDRIFT_RST_BTF"); f != "" {
		target, err = btf.LoadSpec(f)
	} else {
		if _, serr := os.Stat("/sys/kernel/btf/vmlinux"); serr != nil {
			t.Skip("kernel has no BTF (/sys/kernel/btf/vmlinux)")
		}
		target, err = btf.LoadKernelSpec()
	}
	if err != nil {
		t.Fatal(err)
	}
	spec, err := bpf.LoadProbe()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, ps := range spec.Programs {
		var relos []*btf.CORERelocation
		for i := range ps.Instructions {
			if r := btf.CORERelocationMetadata(&ps.Instructions[i]); r != nil {
				relos = append(relos, r)
			}
		}
		if strings.HasPrefix(name, "fentry_") && len(relos) == 0 {
			t.Errorf("%s: no CO-RE relocations found (expected some)", name)
		}
		fixups, err := btf.CORERelocate(relos, []*btf.Spec{target}, binary.LittleEndian, spec.Types.TypeID)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for i, f := range fixups {
			n++
			if strings.Contains(f.String(), "poison") {
				t.Errorf("%s: relocation %v does not resolve: %s", name, relos[i], f.String())
			}
		}
	}
	t.Logf("%d relocations resolved", n)
}
