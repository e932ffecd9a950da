package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	goiptables "github.com/coreos/go-iptables/iptables"
	"golang.org/x/sys/unix"

	"github.com/netdrift/netdrift/internal/nsutil"
)

// chainEntries are the chains per table through which kube-proxy's
// iptables mode handles Service traffic (what Parse walks); a per-chain
// read starts at them and follows every jump to another KUBE-* chain.
var chainEntries = []struct {
	table  string
	chains []string
}{
	{"nat", []string{chainServices, chainNodePorts}},
	{"filter", []string{chainServices, chainExtServices, chainNodePorts, chainProxyFW}},
}

// chainLister lists one chain as `iptables -t TABLE -S CHAIN` prints it
// (go-iptables' IPTables.List).
type chainLister interface {
	List(table, chain string) ([]string, error)
}

// readChains reads kube-proxy's chains of one family one at a time and
// assembles them as iptables-save text that Parse reads: per table a
// "*table" header, each chain's "-N" and "-A" lines as -S prints them (the
// format iptables-save's rule lines share), and COMMIT. A chain that does
// not exist is left out, as iptables-save would not list it; any other
// failure fails the read. It returns the text and the chains listed.
func readChains(l chainLister) ([]byte, int, error) {
	var b bytes.Buffer
	listed := 0
	for _, e := range chainEntries {
		fmt.Fprintf(&b, "*%s\n", e.table)
		queue, seen := slices.Clone(e.chains), map[string]bool{}
		for len(queue) > 0 {
			chain := queue[0]
			queue = queue[1:]
			if seen[chain] {
				continue
			}
			seen[chain] = true
			lines, err := l.List(e.table, chain)
			listed++
			if err != nil {
				if noSuchChain(err) {
					continue
				}
				return nil, listed, fmt.Errorf("listing %s %s: %w", e.table, chain, err)
			}
			for _, line := range lines {
				if strings.HasPrefix(line, "-P ") {
					continue // a built-in chain's policy: no part of iptables-save's rule lines
				}
				b.WriteString(line)
				b.WriteByte('\n')
				if t := ruleTarget(line); strings.HasPrefix(t, "KUBE-") && !seen[t] {
					queue = append(queue, t)
				}
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes(), listed, nil
}

// ruleTarget is the chain or target a -S rule line jumps or goes to ("" when none).
func ruleTarget(line string) string {
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "-j", "--jump", "-g", "--goto":
			return f[i+1]
		}
	}
	return ""
}

// noSuchChain reports whether err is the iptables command saying the
// chain does not exist.
func noSuchChain(err error) bool {
	var e *goiptables.Error
	return errors.As(err, &e) && e.IsNotExist()
}

// ChainReadStats describes the last per-chain read.
type ChainReadStats struct {
	Backend  string
	Chains   int           // chains listed (one iptables command each)
	Duration time.Duration // wall time of the whole read
}

// chainRead reads kube-proxy's rules chain by chain with the iptables
// command of backend (iptables-nft or iptables-legacy, and the ip6tables
// one when v6) in netns ("" = own), for Parse. go-iptables runs the
// commands; they run in the namespace because they are started from an OS
// thread switched into it (inNetns).
func chainRead(netns, backend string, v6 bool) (Dumps, ChainReadStats, error) {
	st := ChainReadStats{Backend: backend}
	start := time.Now()
	var d Dumps
	err := inNetns(netns, func() error {
		var err error
		if d.IPv4, err = chainReadFamily(backend, false, &st); err != nil {
			return err
		}
		if v6 {
			d.IPv6, err = chainReadFamily(backend, true, &st)
		}
		return err
	})
	st.Duration = time.Since(start)
	return d, st, err
}

func chainReadFamily(backend string, v6 bool, st *ChainReadStats) ([]byte, error) {
	name := "iptables-" + backend
	if v6 {
		name = "ip6tables-" + backend
	}
	path, err := findBinary(name)
	if err != nil {
		return nil, fmt.Errorf("per-chain read: %w (install the iptables package)", err)
	}
	ipt, err := goiptables.New(goiptables.Path(path))
	if err != nil {
		return nil, fmt.Errorf("per-chain read with %s: %w", name, err)
	}
	text, n, err := readChains(ipt)
	st.Chains += n
	if err != nil {
		return nil, fmt.Errorf("per-chain read with %s: %w", name, err)
	}
	return text, nil
}

// inNetns runs fn on an OS thread switched into netns ("" = own: fn runs
// as called). Commands fn starts inherit the thread's namespace. The
// thread is never switched back: it stays locked and ends with its
// goroutine, so nothing else runs in the namespace by mistake.
func inNetns(netns string, fn func() error) error {
	if netns == "" {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- nsutil.WithFd(netns, func(fd int) error {
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("enter network namespace %q: %w", netns, err)
			}
			return fn()
		})
	}()
	return <-errc
}
