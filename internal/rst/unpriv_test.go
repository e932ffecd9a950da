package rst

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const childEnv = "NETDRIFT_RST_UNPRIV_CHILD"

// TestMain lets the test binary act as the unprivileged child of
// TestLoadWithoutPrivileges: it tries to load the probe and prints the status.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		p, err := Load(Config{})
		out := struct {
			Status Status `json:"status"`
			Err    string `json:"err"`
			IsUnsp bool   `json:"is_unsupported"`
			Watch  string `json:"watch"`
		}{Status: p.Status(), IsUnsp: errors.Is(err, ErrUnsupported)}
		if err != nil {
			out.Err = err.Error()
		}
		if werr := p.Watch(netip.MustParseAddr("192.0.2.1")); werr != nil {
			out.Watch = werr.Error()
		}
		p.Close()
		json.NewEncoder(os.Stdout).Encode(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLoadWithoutPrivileges runs this test binary as user nobody (no
// capabilities): Load must fail cleanly with ModeNone and a reason naming the
// missing privilege, and the process must keep running.
func TestLoadWithoutPrivileges(t *testing.T) {
	requireRoot(t)
	ensureTracefs(t)
	dir, err := os.MkdirTemp("", "nd-rst-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "rst.test")
	copyFile(t, self, bin)

	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child as nobody: %v\nstdout: %s", err, out)
	}
	var res struct {
		Status Status `json:"status"`
		Err    string `json:"err"`
		IsUnsp bool   `json:"is_unsupported"`
		Watch  string `json:"watch"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	t.Logf("unprivileged status: %+v", res.Status)
	if res.Status.Up || res.Status.Mode != ModeNone {
		t.Errorf("status %+v, want up=false mode=none", res.Status)
	}
	if !res.IsUnsp || res.Err == "" {
		t.Errorf("error %q: want one wrapping ErrUnsupported", res.Err)
	}
	for _, want := range []string{"tracepoint:", "fentry:", "CAP_BPF"} {
		if !strings.Contains(res.Status.Reason, want) {
			t.Errorf("reason %q does not mention %q", res.Status.Reason, want)
		}
	}
	if !strings.Contains(res.Watch, "unsupported") {
		t.Errorf("Watch on an unloaded probe: %q, want an unsupported error", res.Watch)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNilAndUnloadedProbe: every method is safe on nil and on a failed load.
func TestNilAndUnloadedProbe(t *testing.T) {
	for name, p := range map[string]*Probe{
		"nil":      nil,
		"unloaded": {status: Status{Mode: ModeNone, Reason: "test: no kernel"}},
	} {
		t.Run(name, func(t *testing.T) {
			if p.Mode() != ModeNone || p.Status().Up {
				t.Errorf("status %+v", p.Status())
			}
			if err := p.Watch(netip.MustParseAddr("10.0.0.1")); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Watch: %v, want ErrUnsupported", err)
			}
			if err := p.Unwatch(netip.MustParseAddr("10.0.0.1")); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Unwatch: %v, want ErrUnsupported", err)
			}
			if c, err := p.Counts(); err != nil || len(c) != 0 {
				t.Errorf("Counts: %v %v", c, err)
			}
			if _, ok := <-p.Events(context.Background()); ok {
				t.Error("Events channel not closed")
			}
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}
