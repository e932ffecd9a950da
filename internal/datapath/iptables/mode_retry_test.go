package iptables

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestNLRetryAt: a netlink read that failed only because kube-proxy kept
// committing through it (here a chain gone mid-read) is tried again on the
// next read; any other failure keeps the iptables-save fallback for
// nlRetryAfter.
func TestNLRetryAt(t *testing.T) {
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	vanished := fmt.Errorf("nf_tables get chain nat KUBE-SVC-X: %w", syscall.ENOENT)
	if got := nlRetryAt(vanished, now); !got.Equal(now) {
		t.Errorf("transient failure: retry at %v, want at once (%v)", got, now)
	}
	undecodable := fmt.Errorf("%w: ip nat chain KUBE-SEP-X: unknown expression", ErrUndecodable)
	if got := nlRetryAt(undecodable, now); !got.Equal(now.Add(nlRetryAfter)) {
		t.Errorf("undecodable rule: retry at %v, want %v", got, now.Add(nlRetryAfter))
	}
	k := &Mode{nl: &NFTReader{}, nlOK: true}
	k.nlPath.failed(vanished, time.Now(), nlRetryAt(vanished, time.Now()))
	if !k.netlinkActive() {
		t.Error("after a transient failure the next read does not try netlink")
	}
	k.nlPath.failed(undecodable, time.Now(), nlRetryAt(undecodable, time.Now()))
	if k.netlinkActive() {
		t.Error("after an undecodable rule the next read tries netlink again")
	}
}
