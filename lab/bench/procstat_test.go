package bench

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	line := "1234 (kube (proxy)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 31 7 3 20 0 12 0 555 0 0"
	c, err := ParseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if c.User != 2500*time.Millisecond || c.System != 310*time.Millisecond || c.ChildUser != 70*time.Millisecond || c.ChildSystem != 30*time.Millisecond {
		t.Fatalf("got %+v", c)
	}
	if c.Total() != 2910*time.Millisecond || c.Children() != 100*time.Millisecond {
		t.Fatalf("totals %v %v", c.Total(), c.Children())
	}
	if _, err := ParseStat("1 (x) S 1 2"); err == nil {
		t.Fatal("short line accepted")
	}
}

func TestParseStatus(t *testing.T) {
	m, err := ParseStatus("Name:\tx\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n")
	if err != nil || m.HWM != 2<<20 || m.RSS != 1<<20 {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := ParseStatus("Name: x\n"); err == nil {
		t.Fatal("missing fields accepted")
	}
}

func TestReadSelf(t *testing.T) {
	if _, err := ReadCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if m, err := ReadMem(os.Getpid()); err != nil || m.HWM <= 0 {
		t.Fatalf("%+v %v", m, err)
	}
}

// TestOverIdle: the churn window's CPU less the idle rate over its length.
func TestOverIdle(t *testing.T) {
	idle := &Window{Took: 30 * time.Second, Agent: CPU{User: 300 * time.Millisecond}}
	churn := Window{Took: 60 * time.Second, Agent: CPU{User: 1500 * time.Millisecond, ChildUser: 100 * time.Millisecond}}
	if got, want := overIdle(churn, idle), 1000*time.Millisecond; got != want {
		t.Errorf("over idle %v, want %v (1.6 s less 10 ms/s x 60 s)", got, want)
	}
	if got := overIdle(churn, nil); got != churn.Agent.Total() {
		t.Errorf("without an idle window %v, want the window's own %v", got, churn.Agent.Total())
	}
	busyIdle := &Window{Took: time.Second, Agent: CPU{User: time.Second}}
	if got := overIdle(churn, busyIdle); got != 0 {
		t.Errorf("idle busier than the churn: %v, want 0", got)
	}
}
