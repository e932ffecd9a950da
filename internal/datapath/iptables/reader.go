package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/netdrift/netdrift/internal/model"
)

// iptables backends.
const (
	BackendAuto   = "auto"
	BackendLegacy = "legacy"
	BackendNFT    = "nft"
)

// Config says how to read kube-proxy's iptables rules.
type Config struct {
	// NetNS, when set, runs the save commands in that named network
	// namespace ("ip netns exec NAME ..."; for tests and the lab).
	NetNS string
	// Backend is auto (default when empty), legacy or nft. auto picks the
	// backend that holds KUBE-* chains, as kube-proxy's image does.
	Backend string
	// IPv6 also reads ip6tables.
	IPv6 bool
}

// Stats describes the last dump.
type Stats struct {
	Backend  string        // legacy or nft
	Reason   string        // why that backend (auto detection)
	Duration time.Duration // wall time of all save commands
	CPU      time.Duration // user+system CPU time the save commands used
	Bytes    int           // size of the dumps
	At       time.Time     // when the dump started
}

// Reader reads kube-proxy's iptables rules with iptables-save. It only
// reads: it never runs iptables-restore or anything that changes rules.
type Reader struct {
	Config  Config
	mu      sync.Mutex
	hints   model.Hints // what the API knows (resolves comment-less chains); see SetHints
	backend string      // chosen backend, kept while it holds kube-proxy's chains
	reason  string
	stats   Stats
}

var _ interface {
	Snapshot(context.Context) (model.Observed, error)
} = (*Reader)(nil)

// Name is the datapath mode.
func (s *Reader) Name() string { return model.ModeIPTables }

// SetHints hands the reader what the API knows, for the next parse.
func (s *Reader) SetHints(h model.Hints) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hints = h
}

// Stats returns the figures of the last dump.
func (s *Reader) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Snapshot dumps and parses the current rules.
func (s *Reader) Snapshot(ctx context.Context) (model.Observed, error) {
	dumps, st, err := s.Fetch(ctx)
	if err != nil {
		return model.Observed{}, err
	}
	s.mu.Lock()
	hints := s.hints
	s.mu.Unlock()
	obs, err := Parse(dumps, hints)
	if err != nil {
		return model.Observed{}, fmt.Errorf("iptables (%s backend): %w", st.Backend, err)
	}
	return obs, nil
}

// Fetch runs the save commands (nat and filter, IPv4 and optionally IPv6)
// of the configured or detected backend. No parsing beyond detection.
func (s *Reader) Fetch(ctx context.Context) (Dumps, Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{At: time.Now()}
	r := &runner{netns: s.Config.NetNS, stats: &st}
	backend, reason, natV4, err := s.pickBackend(ctx, r)
	if err != nil {
		return Dumps{}, st, err
	}
	st.Backend, st.Reason = backend, reason
	var d Dumps
	if d.IPv4, err = r.dumpFamily(ctx, backend, false, natV4); err != nil {
		return Dumps{}, st, err
	}
	if s.Config.IPv6 {
		if d.IPv6, err = r.dumpFamily(ctx, backend, true, nil); err != nil {
			return Dumps{}, st, err
		}
	}
	st.Duration = time.Since(st.At)
	st.Bytes = len(d.IPv4) + len(d.IPv6)
	s.stats = st
	return d, st, nil
}

// pickBackend returns the backend to read. In auto mode it keeps the last
// choice while that backend still holds kube-proxy's chains, else detects
// again; the detection's nat dump is returned so it is not taken twice.
func (s *Reader) pickBackend(ctx context.Context, r *runner) (string, string, []byte, error) {
	switch s.Config.Backend {
	case BackendLegacy, BackendNFT:
		return s.Config.Backend, "configured", nil, nil
	case "", BackendAuto:
	default:
		return "", "", nil, fmt.Errorf("iptables backend %q: want auto, legacy or nft", s.Config.Backend)
	}
	if s.backend != "" {
		nat, err := r.save(ctx, s.backend, false, "nat")
		if err != nil {
			return "", "", nil, err
		}
		if kubeChainLines(nat) > 0 {
			return s.backend, s.reason, nat, nil
		}
	}
	b, reason, nat, err := r.detect(ctx)
	if err != nil {
		return "", "", nil, err
	}
	s.backend, s.reason = b, reason
	return b, reason, nat, nil
}

// chooseBackend decides between the legacy and nft backends from the
// number of KUBE-* lines each holds (-1: backend not available).
func chooseBackend(legacyKube, nftKube int) (string, string) {
	switch {
	case legacyKube > nftKube:
		return BackendLegacy, fmt.Sprintf("auto: iptables-legacy holds %d KUBE-* lines, iptables-nft %d", legacyKube, max(nftKube, 0))
	case nftKube > 0:
		return BackendNFT, fmt.Sprintf("auto: iptables-nft holds %d KUBE-* lines, iptables-legacy %d", nftKube, max(legacyKube, 0))
	case nftKube == 0:
		return BackendNFT, "auto: no KUBE-* chains in either backend; nft is the default"
	}
	return BackendLegacy, "auto: only iptables-legacy is available"
}

// kubeChainLines counts chain declarations and rules of KUBE-* chains.
func kubeChainLines(dump []byte) int {
	return bytes.Count(dump, []byte("\n:KUBE-")) + bytes.Count(dump, []byte("\n-A KUBE-"))
}

// runner executes the read-only commands, in a netns if asked.
type runner struct {
	netns string
	stats *Stats
}

// detect dumps the nat table of each available backend and picks one.
// Legacy is only read when the kernel already has legacy tables (reading
// them would otherwise instantiate empty ones).
func (r *runner) detect(ctx context.Context) (string, string, []byte, error) {
	counts := map[string]int{BackendLegacy: -1, BackendNFT: -1}
	dumps, failed := map[string][]byte{}, map[string]error{}
	for _, b := range []string{BackendLegacy, BackendNFT} {
		if _, err := saveBinary(b, false); err != nil {
			continue
		}
		if b == BackendLegacy && !r.legacyTablesExist(ctx, false) {
			counts[b] = 0
			continue
		}
		nat, err := r.save(ctx, b, false, "nat")
		if err != nil {
			failed[b] = err
			continue
		}
		counts[b], dumps[b] = kubeChainLines(nat), nat
	}
	// A save command that is there but fails (refused, killed) is no
	// evidence that its backend holds nothing: unless the other backend
	// holds kube-proxy's chains, the read fails rather than pick the other.
	for b, err := range failed {
		if other := otherBackend(b); counts[other] <= 0 {
			return "", "", nil, err
		}
	}
	if counts[BackendLegacy] < 0 && counts[BackendNFT] < 0 {
		return "", "", nil, fmt.Errorf("%w: neither iptables-legacy-save nor iptables-nft-save found (install the iptables package)", model.ErrUnsupported)
	}
	b, reason := chooseBackend(counts[BackendLegacy], counts[BackendNFT])
	return b, reason, dumps[b], nil
}

// otherBackend is nft for legacy and legacy for nft.
func otherBackend(b string) string {
	if b == BackendNFT {
		return BackendLegacy
	}
	return BackendNFT
}

// legacyTablesExist reports whether the (netns's) kernel has a legacy nat table.
func (r *runner) legacyTablesExist(ctx context.Context, v6 bool) bool {
	file := "/proc/net/ip_tables_names"
	if v6 {
		file = "/proc/net/ip6_tables_names"
	}
	var out []byte
	var err error
	if r.netns == "" {
		out, err = os.ReadFile(file)
	} else {
		out, err = r.output(ctx, "cat", file)
	}
	return err == nil && bytes.Contains(out, []byte("nat"))
}

// dumpFamily returns the nat and filter tables of one family.
func (r *runner) dumpFamily(ctx context.Context, backend string, v6 bool, nat []byte) ([]byte, error) {
	if backend == BackendLegacy && !r.legacyTablesExist(ctx, v6) {
		return []byte{}, nil // no legacy tables: nothing programmed (parse warns)
	}
	var err error
	if nat == nil {
		if nat, err = r.save(ctx, backend, v6, "nat"); err != nil {
			return nil, err
		}
	}
	filter, err := r.save(ctx, backend, v6, "filter")
	if err != nil {
		return nil, err
	}
	return append(nat, filter...), nil
}

// save runs "<backend>-save -t table".
func (r *runner) save(ctx context.Context, backend string, v6 bool, table string) ([]byte, error) {
	bin, err := saveBinary(backend, v6)
	if err != nil {
		return nil, err
	}
	return r.output(ctx, bin, "-t", table)
}

// output runs one command (in the netns if set) and accounts its cost.
func (r *runner) output(ctx context.Context, name string, args ...string) ([]byte, error) {
	var cmd *exec.Cmd
	if r.netns != "" {
		ip, err := findBinary("ip")
		if err != nil {
			return nil, fmt.Errorf("%w: netns %q needs the ip command: %v", model.ErrUnsupported, r.netns, err)
		}
		cmd = exec.CommandContext(ctx, ip, append([]string{"netns", "exec", r.netns, name}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState != nil && r.stats != nil {
		r.stats.CPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// saveBinary finds the save command of a backend and family.
func saveBinary(backend string, v6 bool) (string, error) {
	prefix := "iptables"
	if v6 {
		prefix = "ip6tables"
	}
	name := prefix + "-" + backend + "-save"
	path, err := findBinary(name)
	if err == nil {
		return path, nil
	}
	return "", fmt.Errorf("%w: %s not found (install the iptables package)", model.ErrUnsupported, name)
}

// findBinary looks in PATH, then in the sbin directories PATH often lacks.
func findBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", errors.New(name + ": not in PATH, /usr/sbin or /sbin")
}
