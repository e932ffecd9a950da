package netnstest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

func TestNewRunDoAndCleanup(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) {
		name = New(t, "nd-netnstest")
		if !strings.HasPrefix(name, "nd-netnstest-") || !exists(name) {
			t.Fatalf("namespace %q not created", name)
		}
		out := Run(t, name, "ip", "-o", "link", "show")
		if !strings.Contains(string(out), "lo:") || strings.Count(string(out), "\n") != 1 {
			t.Errorf("a new namespace has only lo, got:\n%s", out)
		}
		if got := string(RunInput(t, name, "hello", "cat")); got != "hello" {
			t.Errorf("stdin: got %q", got)
		}
		host, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer host.Close()
		var inside netns.NsHandle
		err = DoNamed(name, func() (err error) {
			inside, err = netns.Get()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		defer inside.Close()
		if inside.Equal(host) {
			t.Error("DoNamed ran fn in the host's namespace")
		}
		if now, err := netns.Get(); err != nil || !now.Equal(host) {
			t.Errorf("caller's thread left the host namespace (%v)", err)
		}
	})
	if name != "" && exists(name) {
		t.Errorf("namespace %s still there after its test ended", name)
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}

// A test may delete its namespace itself; cleanup then has nothing to do.
func TestDeletedEarly(t *testing.T) {
	name := New(t, "nd-netnstest")
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
}

func TestName(t *testing.T) {
	a, b := Name("p"), Name("p")
	if a == b || !strings.HasPrefix(a, "p-") || !strings.Contains(a, "-"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("names %q %q", a, b)
	}
}
