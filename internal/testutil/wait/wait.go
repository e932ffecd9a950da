// Package wait polls a condition in tests, one helper for every package.
package wait

import (
	"testing"
	"time"
)

// For polls cond every millisecond until it holds; the test fails after
// timeout, naming what it waited for.
func For(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}
