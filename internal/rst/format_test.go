package rst

import (
	"os"
	"strings"
	"testing"
)

func readFormat(t *testing.T, name string) Format {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFormat(string(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func TestParseFormat618(t *testing.T) {
	f := readFormat(t, "tcp_send_reset-6.18.format")
	if f.Name != "tcp_send_reset" || f.ID != 2280 {
		t.Errorf("name %q id %d", f.Name, f.ID)
	}
	if got := f.Fields["daddr"]; got != (Field{Decl: "__u8 daddr[28]", Name: "daddr", Offset: 60, Size: 28}) {
		t.Errorf("daddr = %+v", got)
	}
	if got := f.Fields["skaddr"]; got.Offset != 16 || got.Size != 8 || got.Decl != "const void * skaddr" {
		t.Errorf("skaddr = %+v", got)
	}
	if f.Reasons[1] != "NO_SOCKET" || f.Reasons[11] != "TCP_ABORT_ON_CLOSE" || f.Reasons[25] != "MAX" || len(f.Reasons) != 26 {
		t.Errorf("reasons = %v", f.Reasons)
	}
	if err := CheckSendResetLayout(f); err != nil {
		t.Errorf("6.18 layout rejected: %v", err)
	}
}

func TestCheckLayoutRejects(t *testing.T) {
	old := readFormat(t, "tcp_send_reset-6.1.format")
	err := CheckSendResetLayout(old)
	if err == nil || !strings.Contains(err.Error(), "older than 6.10") {
		t.Errorf("6.1 layout: err %v, want 'older than 6.10'", err)
	}
	if len(old.Reasons) != 0 {
		t.Errorf("6.1 has no reason table, got %v", old.Reasons)
	}
	moved := readFormat(t, "tcp_send_reset-6.18.format")
	fl := moved.Fields["saddr"]
	fl.Offset = 36
	moved.Fields["saddr"] = fl
	if err := CheckSendResetLayout(moved); err == nil || !strings.Contains(err.Error(), `"saddr" at offset 36`) {
		t.Errorf("moved saddr: err %v", err)
	}
}

func TestParseFormatErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"bad id":      {"name: x\nID: abc\n", "line 2: bad ID"},
		"bad field":   {"name: x\nID: 1\nformat:\n\tfield:int a;\toffset:x;\n", "line 4: malformed field"},
		"no fields":   {"name: x\nID: 1\n", "no fields"},
		"empty input": {"", "no fields"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseFormat(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want containing %q", err, tc.want)
			}
		})
	}
}

func FuzzParseFormat(f *testing.F) {
	for _, n := range []string{"tcp_send_reset-6.18.format", "tcp_send_reset-6.1.format"} {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		fm, err := ParseFormat(s)
		if err == nil {
			_ = CheckSendResetLayout(fm)
		}
	})
}
