package datapath

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/nftables"

	"github.com/netdrift/netdrift/internal/model"
)

// Why netlink (github.com/google/nftables) and not sigs.k8s.io/knftables:
// knftables drives the nft binary, and every nft invocation reads the whole
// table to build its cache: 0.20 s of CPU for `nft -j list table` and still
// 0.07 s to list a single chain at 1,000 services / 10,000 endpoints
// (DESIGN.md, "Reading cost"). Over netlink the reader asks the kernel for
// exactly the maps and chains it needs, one chain per request, and no
// process is spawned; that is also what lets the agent re-read only the
// chains a change event names. The netlink path reduces rules to the same
// intermediate form (nftTable) as the JSON parser, so live and offline
// reads of one table yield the same Observed (TestNFTLiveMatchesOffline).

// NFTConfig configures the live nftables reader.
type NFTConfig struct {
	// NetNS is the network namespace to read (a name under /run/netns or a
	// path like /proc/1/ns/net); "" reads the agent's own.
	NetNS string
	// Options carries what the API knows (see NFTOptions).
	Options NFTOptions
	// Retries bounds re-reads when the ruleset changed during a read
	// (default 3); the last read is used, with a warning, if none was stable.
	Retries int
}

// NFTables reads kube-proxy's nftables tables (ip and ip6 kube-proxy) over
// netlink. It implements Source. It never writes.
type NFTables struct {
	Config NFTConfig
}

var _ Source = (*NFTables)(nil)

// Name returns model.ModeNFTables.
func (n *NFTables) Name() string { return model.ModeNFTables }

// Snapshot reads both tables and maps them to the observed model. The read
// spans several netlink requests; it is repeated while the generation id
// changes under it, so the result is one consistent generation.
func (n *NFTables) Snapshot(ctx context.Context) (model.Observed, error) {
	tables, stable, err := n.fetch(ctx)
	if err != nil {
		return model.Observed{}, err
	}
	obs := nftObserve(tables, n.Config.Options)
	if !stable {
		obs.Warnings = append(obs.Warnings, "the ruleset kept changing during the read; it may mix generations")
	}
	return obs, nil
}

// fetch reads the tables (nil for absent ones), retrying on concurrent change.
func (n *NFTables) fetch(ctx context.Context) ([]*nftTable, bool, error) {
	retries := n.Config.Retries
	if retries <= 0 {
		retries = 3
	}
	var tables []*nftTable
	for attempt := 0; attempt <= retries; attempt++ {
		before, err := NFTGeneration(n.Config.NetNS)
		if err != nil {
			return nil, false, err
		}
		tables, err = n.read(ctx)
		if err != nil && !nftIsNotFound(err) {
			return nil, false, err
		}
		after, gerr := NFTGeneration(n.Config.NetNS)
		if gerr != nil {
			return nil, false, gerr
		}
		if before == after && err == nil {
			return tables, true, nil
		}
	}
	return tables, false, nil
}

func (n *NFTables) read(ctx context.Context) ([]*nftTable, error) {
	var out []*nftTable
	err := withNetNSFd(n.Config.NetNS, func(fd int) error {
		opts := []nftables.ConnOption{nftables.AsLasting()}
		if fd != 0 {
			opts = append(opts, nftables.WithNetNSFd(fd))
		}
		conn, err := nftables.New(opts...)
		if err != nil {
			return nftDialError(err)
		}
		defer conn.CloseLasting()
		for _, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
			t, err := nftReadNetlink(ctx, conn, fam)
			if err != nil {
				return fmt.Errorf("%s: %w", nftTableLabel(fam), err)
			}
			out = append(out, t)
		}
		return nil
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return out, err
}
