package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	mobyipvs "github.com/moby/ipvs"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/nsutil"
)

// Kernel is the fetch step: raw IPVS services and destinations over generic
// netlink, and the addresses of a link. It does no interpretation. The real
// implementation is in netlink_linux.go; Fake holds the state in memory.
type Kernel interface {
	Services() ([]*mobyipvs.Service, error)
	Destinations(*mobyipvs.Service) ([]*mobyipvs.Destination, error)
	// LinkAddrs lists the addresses on the named link; ErrNoLink if absent.
	LinkAddrs(link string) ([]netip.Addr, error)
	Close() error
}

// ErrNoLink says the link does not exist.
var ErrNoLink = errors.New("link not found")

// Config configures a Reader. Zero values mean the defaults.
type Config struct {
	// NetNS is a named network namespace ("nd-x", under /var/run/netns) or
	// a path to one ("/proc/123/ns/net"); empty: the caller's namespace.
	NetNS string
	// Link is the dummy link holding the VIPs (default kube-ipvs0).
	Link string
	// SysModuleDir is where the ip_vs module shows up when loaded
	// (default /sys/module); used to report "unsupported" without making
	// the netlink library load the module.
	SysModuleDir string
	// Hints is what the API knows (VIP kinds, node ports, service names); see SetHints.
	Hints model.Hints
	// Open opens the kernel; nil means generic netlink (OpenNetlink).
	Open func(netnsPath string) (Kernel, error)
}

// Reader reads IPVS state (the datapath.Source contract, satisfied without
// importing it: see docs/architecture.md).
type Reader struct {
	cfg  Config
	mu   sync.Mutex
	opts Options // cfg.Hints prepared for Build
}

// NewReader returns a reader for cfg.
func NewReader(cfg Config) *Reader {
	if cfg.Link == "" {
		cfg.Link = DefaultLink
	}
	if cfg.SysModuleDir == "" {
		cfg.SysModuleDir = "/sys/module"
	}
	if cfg.Open == nil {
		cfg.Open = OpenNetlink
	}
	return &Reader{cfg: cfg, opts: OptionsFor(cfg.Hints)}
}

// Name is model.ModeIPVS.
func (r *Reader) Name() string { return model.ModeIPVS }

// SetHints hands the reader what the API knows (after the desired state changed).
func (r *Reader) SetHints(h model.Hints) {
	o := OptionsFor(h)
	r.mu.Lock()
	r.opts = o
	r.mu.Unlock()
}

// Snapshot reads the current IPVS state into the observed model.
func (r *Reader) Snapshot(ctx context.Context) (model.Observed, error) {
	_, obs, err := r.Read(ctx)
	return obs, err
}

// Read returns both the raw table (with the addresses bound on kube-ipvs0,
// see Table.IdleVIPs) and the observed model, from one read.
func (r *Reader) Read(ctx context.Context) (Table, model.Observed, error) {
	t, err := r.Table(ctx)
	if err != nil {
		return Table{}, model.Observed{}, err
	}
	r.mu.Lock()
	o := r.opts
	r.mu.Unlock()
	return t, Build(t, o), nil
}

// Table reads the raw IPVS state (virtual servers and kube-ipvs0 addresses).
func (r *Reader) Table(ctx context.Context) (Table, error) {
	if err := ctx.Err(); err != nil {
		return Table{}, err
	}
	if _, err := os.Stat(filepath.Join(r.cfg.SysModuleDir, "ip_vs")); err != nil {
		return Table{}, fmt.Errorf("%w: ip_vs kernel module not loaded (kube-proxy not in ipvs mode?)", model.ErrUnsupported)
	}
	k, err := r.cfg.Open(nsutil.Path(r.cfg.NetNS))
	if err != nil {
		return Table{}, fmt.Errorf("ipvs: open netlink: %w", err)
	}
	defer k.Close()
	return fetch(k, r.cfg.Link)
}

// fetch collects the raw state and decodes it (decode.go).
func fetch(k Kernel, link string) (Table, error) {
	svcs, err := k.Services()
	if err != nil {
		return Table{}, fmt.Errorf("ipvs: list services: %w", err)
	}
	var t Table
	for _, s := range svcs {
		dsts, err := k.Destinations(s)
		if err != nil {
			return Table{}, fmt.Errorf("ipvs: list real servers of %s: %w", describe(s), err)
		}
		vs, err := decodeService(s, dsts)
		if err != nil {
			return Table{}, err
		}
		t.Services = append(t.Services, vs)
	}
	addrs, err := k.LinkAddrs(link)
	switch {
	case errors.Is(err, ErrNoLink):
		t.LinkAddrs = []netip.Addr{}
	case err != nil:
		return Table{}, fmt.Errorf("ipvs: addresses of %s: %w", link, err)
	default:
		t.LinkFound = true
		t.LinkAddrs = addrs
		if t.LinkAddrs == nil {
			t.LinkAddrs = []netip.Addr{}
		}
	}
	return t, nil
}
