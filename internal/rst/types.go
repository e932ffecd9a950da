package rst

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/netdrift/netdrift/bpf"
)

// Mode is how the probe is attached.
type Mode string

const (
	ModeNone       Mode = "none"       // not loaded; Status.Reason says why
	ModeTracepoint Mode = "tracepoint" // tcp/tcp_send_reset, kernels >= 6.10
	ModeBTF        Mode = "tp_btf"     // the same tracepoint via BTF (no tracefs needed), >= 6.10
	ModeFentry     Mode = "fentry"     // tcp_v{4,6}_send_reset + tcp_send_active_reset
)

// ParseMode parses a mode name; "" and "auto" mean automatic selection.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "auto":
		return "", nil
	case string(ModeTracepoint), string(ModeBTF), string(ModeFentry):
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown rst probe mode %q (want auto, tracepoint, tp_btf or fentry)", s)
}

// Status says whether the probe runs, in which mode, and why.
type Status struct {
	Up     bool   `json:"up"`
	Mode   Mode   `json:"mode"`
	Reason string `json:"reason"`
}

// Direction says which side of a reset the watched address is on.
type Direction uint8

const (
	// SentBy: the watched address sent the reset (its closed listener
	// refused a client: "connection refused").
	SentBy Direction = 1
	// SentTo: the reset was sent to the watched address (a peer reset a
	// connection of the watched pod, or a client reset a connection to a VIP).
	SentTo Direction = 2
)

func (d Direction) String() string {
	switch d {
	case SentBy:
		return "sent_by_watched"
	case SentTo:
		return "sent_to_watched"
	case SentBy | SentTo:
		return "both_watched"
	}
	return fmt.Sprintf("direction_%d", uint8(d))
}

// Reason codes the probe itself assigns.
const (
	ReasonNotSpecified uint16 = 0
	ReasonNoSocket     uint16 = 1
	// ReasonUnknown: fallback mode on a kernel without reset reasons (< 6.10),
	// for a reset sent by a socket.
	ReasonUnknown uint16 = 0xffff
)

// ReasonKey identifies one counter of an address.
type ReasonKey struct {
	Direction Direction
	Reason    string
}

// Counts are the resets counted for one watched address since it was watched.
type Counts struct {
	SentBy   uint64               `json:"sent_by"`
	SentTo   uint64               `json:"sent_to"`
	ByReason map[ReasonKey]uint64 `json:"-"`
}

// Total is SentBy + SentTo.
func (c Counts) Total() uint64 { return c.SentBy + c.SentTo }

func (c *Counts) add(dir Direction, reason string, n uint64) {
	switch dir {
	case SentBy:
		c.SentBy += n
	case SentTo:
		c.SentTo += n
	}
	if c.ByReason == nil {
		c.ByReason = map[ReasonKey]uint64{}
	}
	c.ByReason[ReasonKey{dir, reason}] += n
}

func (c *Counts) merge(o Counts) {
	for k, n := range o.ByReason {
		c.add(k.Direction, k.Reason, n)
	}
}

// Event is one reset involving a watched address (rate limited in the kernel).
type Event struct {
	Time       time.Time
	Sender     netip.AddrPort // who sent the reset
	Peer       netip.AddrPort // who it was sent to (the client, for connection refused)
	Direction  Direction      // SentBy, SentTo or both
	Reason     string
	ReasonCode uint16
	WatchedID  uint32
	Source     string // tracepoint, v4_reply, v6_reply, active
}

// Stats are the probe's own loss counters.
type Stats struct {
	EventsRateLimited uint64 `json:"events_rate_limited"`
	EventsLost        uint64 `json:"events_lost"`
	CountersFull      uint64 `json:"counters_full"`
	Unparsed          uint64 `json:"unparsed"`
}

// State is an endpoint's state when a reset was sent, as the kernel counts
// it (WatchEndpoint).
type State uint8

const (
	StateNone        State = 0 // Watch / WatchPort: not classified
	StateLive        State = 1 // before any deletion request the probe knew of: bucketed, settled later
	StateTerminating State = 2 // at or after the pod's deletion request
	StateDeleted     State = 3 // at or after the pod left the API
)

// BucketShift: a live reset is counted in the bucket of its kernel time
// (CLOCK_MONOTONIC ns) >> BucketShift (16.8 ms buckets).
const BucketShift = 24

// watchClassify is the probe's WATCH_CLASSIFY flag.
const watchClassify = 1

// WatchState is what the probe needs to classify a watched endpoint's
// resets: kernel times (CLOCK_MONOTONIC ns, bpf_ktime_get_ns' clock) of its
// pod's deletion request and of its removal from the API; 0 when unknown.
type WatchState struct {
	TermNs, GoneNs uint64
}

// CounterKey identifies one of the kernel's counters.
type CounterKey struct {
	Addr   netip.Addr
	Dir    Direction
	State  State
	Reason string
	// Port is the watched side's port when it is one of the address's
	// endpoint ports (SetPorts), else 0.
	Port uint16
	// Bucket is the reset's kernel time >> BucketShift for StateLive, else 0.
	Bucket uint64
}

// MonoNow is the kernel clock the probe timestamps resets with
// (CLOCK_MONOTONIC, bpf_ktime_get_ns), in ns.
func MonoNow() uint64 { return bpf.KtimeNow() }
