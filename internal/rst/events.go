package rst

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/netdrift/netdrift/bpf"
)

// eventSize is sizeof(struct rst_event) in bpf/rst.c.
const eventSize = 56

var sourceNames = map[uint8]string{1: "tracepoint", 2: "v4_reply", 3: "v6_reply", 4: "active"}

// decodeEvent parses one raw ring buffer record (little-endian, see
// struct rst_event). mono and wall are a simultaneous reading of
// CLOCK_MONOTONIC and the wall clock, to place ktime on the wall clock.
func decodeEvent(b []byte, reasons reasonTable, mono time.Duration, wall time.Time) (Event, error) {
	if len(b) < eventSize {
		return Event{}, fmt.Errorf("rst event: %d bytes, want %d", len(b), eventSize)
	}
	le := binary.LittleEndian
	ktime := time.Duration(le.Uint64(b[0:8]))
	sender := netip.AddrFrom16([16]byte(b[8:24])).Unmap()
	peer := netip.AddrFrom16([16]byte(b[24:40])).Unmap()
	code := le.Uint16(b[44:46])
	src := sourceNames[b[47]]
	if src == "" {
		src = fmt.Sprintf("source_%d", b[47])
	}
	return Event{
		Time:       wall.Add(ktime - mono),
		Sender:     netip.AddrPortFrom(sender, le.Uint16(b[40:42])),
		Peer:       netip.AddrPortFrom(peer, le.Uint16(b[42:44])),
		ReasonCode: code,
		Reason:     reasons.name(code),
		Direction:  Direction(b[46]),
		Source:     src,
		WatchedID:  le.Uint32(b[48:52]),
	}, nil
}

func monotonicNow() time.Duration { return time.Duration(bpf.KtimeNow()) }

// Events streams the kernel's (rate-limited) reset events until ctx ends or
// the probe is closed, then closes the channel. Only one reader may run at a
// time; a second call, or a call on a probe that is not loaded, returns a
// closed channel.
func (p *Probe) Events(ctx context.Context) <-chan Event {
	ch := make(chan Event, 64)
	if p == nil {
		close(ch)
		return ch
	}
	p.mu.Lock()
	if p.reader == nil || p.closed || p.reading {
		p.mu.Unlock()
		close(ch)
		return ch
	}
	p.reading = true
	rd, reasons := p.reader, p.reasons
	p.mu.Unlock()

	// Flush interrupts a blocked ReadInto (it then returns ErrFlushed).
	stop := context.AfterFunc(ctx, func() { _ = rd.Flush() })
	go func() {
		defer close(ch)
		defer func() {
			stop()
			p.mu.Lock()
			p.reading = false
			p.mu.Unlock()
		}()
		p.readLoop(ctx, rd, reasons, ch)
	}()
	return ch
}

func (p *Probe) readLoop(ctx context.Context, rd *ringbuf.Reader, reasons reasonTable, ch chan<- Event) {
	var rec ringbuf.Record
	for ctx.Err() == nil {
		if err := rd.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrFlushed) {
				continue // ctx ended (checked above), or a stale flush
			}
			return // closed reader or a broken ring
		}
		ev, err := decodeEvent(rec.RawSample, reasons, monotonicNow(), time.Now())
		if err != nil {
			continue
		}
		select {
		case ch <- ev:
		case <-ctx.Done():
			return
		}
	}
}
