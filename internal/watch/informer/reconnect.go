package informer

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// ReconnectTransport holds GET requests (lists and watches) while the API
// server cannot be dialled, and redials them at a fixed, jittered interval.
//
// Why: client-go's reflectors back off exponentially on refused connections,
// up to [30 s, 60 s) between attempts. After an API server outage of that
// order the agent's caches (and so its watch health) would come back up to a
// minute after the API server did. Holding the request here keeps the
// reflector's own backoff at its floor, so recovery follows the API server's
// return within about one interval. Only dial failures are held: nothing was
// sent, so a retry is safe; every other error and every response go to
// client-go unchanged (429 keeps its own backoff).
//
// Every held request of one transport waits for the same retry slot, so a
// node dials at most a few times per interval however many informers it runs.
type ReconnectTransport struct {
	next     http.RoundTripper
	interval time.Duration

	mu        sync.Mutex
	slot      time.Time // next shared retry time
	downSince time.Time // first dial failure of the current outage (zero: reachable)
	lastErr   error
}

// NewReconnectTransport wraps next; interval <= 0 disables holding.
func NewReconnectTransport(next http.RoundTripper, interval time.Duration) *ReconnectTransport {
	return &ReconnectTransport{next: next, interval: interval}
}

// RoundTrip implements http.RoundTripper.
func (t *ReconnectTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		resp, err := t.next.RoundTrip(req)
		if err == nil || !dialFailed(err) {
			if err == nil {
				t.reachable()
			}
			return resp, err
		}
		if t.interval <= 0 || req.Method != http.MethodGet || req.Body != nil && req.Body != http.NoBody {
			t.unreachable(err)
			return resp, err
		}
		if werr := t.wait(req.Context(), err); werr != nil {
			return nil, err
		}
	}
}

// Unreachable reports since when the API server refuses connections (and the
// last dial error), or ok=false while it is reachable.
func (t *ReconnectTransport) Unreachable() (since time.Time, err error, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.downSince, t.lastErr, !t.downSince.IsZero()
}

func (t *ReconnectTransport) reachable() {
	t.mu.Lock()
	t.downSince, t.lastErr = time.Time{}, nil
	t.mu.Unlock()
}

func (t *ReconnectTransport) unreachable(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.downSince.IsZero() {
		t.downSince = time.Now()
	}
	t.lastErr = err
}

// wait sleeps until the shared retry slot (now + interval, jittered ±50 %,
// when none is pending) or until ctx ends.
func (t *ReconnectTransport) wait(ctx context.Context, err error) error {
	t.unreachable(err)
	t.mu.Lock()
	now := time.Now()
	if !t.slot.After(now) {
		jitter := time.Duration(rand.Int64N(int64(t.interval))) - t.interval/2
		t.slot = now.Add(t.interval + jitter)
	}
	d := t.slot.Sub(now)
	t.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// dialFailed reports whether err happened before anything was sent: the
// connection was refused, unreachable, or the dial timed out.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}
