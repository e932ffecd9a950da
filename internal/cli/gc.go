package cli

import (
	"os"
	"runtime/debug"
)

// offlineGCPercent is the GC target of `netdrift diff`, a short-lived
// process that keeps most of what it allocates (the cluster objects, the
// parsed dump, the desired state): at GOGC=100 the collector marks that
// growing heap again and again for little garbage. At 400 the peak heap
// stays close to the total allocated (at 10k endpoints 90 MB instead of
// 74 MB, still below the 97 MB before the streaming cluster-file decoder)
// and the diff costs about 14 % less CPU (BENCHMARKS.md, "Offline diff").
const offlineGCPercent = 400

// offlineGC sets offlineGCPercent unless the user set GOGC, and returns
// the function that restores the previous setting.
func offlineGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(offlineGCPercent)
	return func() { debug.SetGCPercent(prev) }
}
