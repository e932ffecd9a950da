package nftables

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestFetchOutcome: an object that vanished mid-read (ENOENT) is retried
// like a moved generation, and on the last attempt fails the read instead
// of returning the incomplete tables as a mixed reading.
func TestFetchOutcome(t *testing.T) {
	enoent := fmt.Errorf("chain: %w", syscall.ENOENT)
	other := errors.New("netlink receive: no buffer space available")
	for _, tc := range []struct {
		name          string
		before, after uint32
		err           error
		last          bool
		want          fetchResult
	}{
		{"stable", 4, 4, nil, false, fetchStable},
		{"stable last", 4, 4, nil, true, fetchStable},
		{"moved", 4, 5, nil, false, fetchRetry},
		{"moved last", 4, 5, nil, true, fetchMixed},
		{"vanished", 4, 5, enoent, false, fetchRetry},
		{"vanished same gen", 4, 4, enoent, false, fetchRetry},
		{"vanished last", 4, 5, enoent, true, fetchFailed},
		{"error", 4, 4, other, false, fetchFailed},
	} {
		if got := fetchOutcome(tc.before, tc.after, tc.err, tc.last); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if err := fetchError(enoent, 4); !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "each of 4 reads") {
		t.Errorf("fetchError: %v", err)
	}
	if err := fetchError(other, 4); err != other {
		t.Errorf("fetchError of a plain error: %v", err)
	}
}
