package cli

import (
	"os"
	"runtime/debug"

	"github.com/netdrift/netdrift/internal/clusterfile"
)

// `netdrift diff` is a short-lived process that keeps most of what it
// allocates (the cluster objects, the parsed dump, the desired state), so
// every collection marks a growing heap for little garbage: at GOGC=100
// that was ~14 % of its CPU, at GOGC=400 still ~8 % at 10k endpoints.
// It now collects only if its heap passes a limit well above what its
// inputs can make: offlineHeapBase plus offlineHeapPerByte times the bytes
// of the files it reads (it allocates ~5 bytes per input byte in all, at
// 10k and at 100k endpoints; BENCHMARKS.md, "Offline diff"). The peak heap
// is then the total allocated, about what GOGC=400 reached. A diff of the
// live datapath (--netns) reads input of unknown size: offlineGCPercent.
const (
	offlineGCPercent   = 400
	offlineHeapBase    = 64 << 20
	offlineHeapPerByte = 16
)

// offlineGC sets the diff's GC policy for input files of the given paths
// (none: a live read; standard input or a gzip'd file: of unknown size,
// treated as a live read) unless the user set GOGC or GOMEMLIMIT, and returns
// the function that restores the previous settings.
func offlineGC(paths ...string) (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	size, known := inputBytes(paths)
	if !known || size == 0 {
		prev := debug.SetGCPercent(offlineGCPercent)
		return func() { debug.SetGCPercent(prev) }
	}
	prevLimit := debug.SetMemoryLimit(offlineHeapBase + offlineHeapPerByte*size)
	prev := debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(prev)
		debug.SetMemoryLimit(prevLimit)
	}
}

// inputBytes is the total size of the named inputs ("" is no input), and
// whether all of them are known before reading.
func inputBytes(paths []string) (int64, bool) {
	var size int64
	for _, p := range paths {
		if p == "" {
			continue
		}
		n, ok := clusterfile.InputSize(p)
		if !ok {
			return 0, false
		}
		size += n
	}
	return size, true
}
