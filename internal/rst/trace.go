package rst

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"text/tabwriter"
	"time"
)

// TraceOptions configures `netdrift trace-rsts`.
type TraceOptions struct {
	IPs      []netip.Addr  // addresses to watch (--ip, comma separated)
	Port     uint16        // only resets on this port of the watched address; 0 = any (--port)
	Duration time.Duration // how long to watch (--duration)
	JSON     bool          // -o json
	Mode     Mode          // force a probe mode; "" selects automatically

	started func() // test hook: called once the addresses are watched
}

// TraceResult is what trace-rsts prints.
type TraceResult struct {
	Mode            Mode              `json:"mode"`
	DurationSeconds float64           `json:"duration_seconds"`
	Counts          map[string]uint64 `json:"counts"`  // sent_by + sent_to
	SentBy          map[string]uint64 `json:"sent_by"` // resets the address sent (connection refused by it)
	SentTo          map[string]uint64 `json:"sent_to"` // resets sent to the address
}

// ParseIPList parses "IP[,IP...]".
func ParseIPList(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != ',' {
			continue
		}
		f := s[start:i]
		start = i + 1
		if f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("--ip: item %d %q: %w", len(out)+1, f, err)
		}
		out = append(out, a.Unmap())
	}
	if len(out) == 0 {
		return nil, errors.New("--ip: no addresses")
	}
	return out, nil
}

// RunTrace watches opts.IPs for opts.Duration (or until ctx ends) without a
// cluster and writes the reset counts to w.
func RunTrace(ctx context.Context, opts TraceOptions, w io.Writer) error {
	if len(opts.IPs) == 0 {
		return errors.New("trace-rsts: no --ip given")
	}
	if opts.Duration <= 0 {
		return errors.New("trace-rsts: --duration must be positive")
	}
	p, err := Load(Config{Mode: opts.Mode, NoEvents: true})
	if err != nil {
		return fmt.Errorf("trace-rsts: %w", err)
	}
	defer p.Close()
	for _, ip := range opts.IPs {
		if err := p.WatchPort(ip, opts.Port); err != nil {
			return fmt.Errorf("trace-rsts: %w", err)
		}
	}
	start := time.Now()
	if opts.started != nil {
		opts.started()
	}
	t := time.NewTimer(opts.Duration)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	counts, err := p.Counts()
	if err != nil {
		return fmt.Errorf("trace-rsts: %w", err)
	}
	res := NewTraceResult(p.Mode(), time.Since(start), opts.IPs, counts)
	if opts.JSON {
		return WriteTraceJSON(w, res)
	}
	return WriteTraceTable(w, res, opts.IPs)
}

// NewTraceResult builds the result; every requested address appears, with 0
// when nothing was counted.
func NewTraceResult(mode Mode, d time.Duration, ips []netip.Addr, counts map[netip.Addr]Counts) TraceResult {
	r := TraceResult{Mode: mode, DurationSeconds: d.Round(time.Millisecond).Seconds(),
		Counts: map[string]uint64{}, SentBy: map[string]uint64{}, SentTo: map[string]uint64{}}
	for _, ip := range ips {
		c := counts[ip.Unmap()]
		k := ip.Unmap().String()
		r.Counts[k] = c.Total()
		r.SentBy[k] = c.SentBy
		r.SentTo[k] = c.SentTo
	}
	return r
}

// WriteTraceJSON writes {"counts": {"IP": N, ...}, ...} (keys sorted by encoding/json).
func WriteTraceJSON(w io.Writer, r TraceResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTraceTable writes a table in the order the addresses were given.
func WriteTraceTable(w io.Writer, r TraceResult, ips []netip.Addr) error {
	fmt.Fprintf(w, "rst probe mode %s, watched %.1fs\n", r.Mode, r.DurationSeconds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IP\tRSTS\tSENT_BY\tSENT_TO")
	seen := map[string]bool{}
	for _, ip := range ips {
		k := ip.Unmap().String()
		if seen[k] {
			continue
		}
		seen[k] = true
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", k, r.Counts[k], r.SentBy[k], r.SentTo[k])
	}
	return tw.Flush()
}
