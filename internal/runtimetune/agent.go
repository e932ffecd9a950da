package runtimetune

import (
	"fmt"
	"runtime/debug"
)

// Policy is what Agent set, for the agent's start-up log.
type Policy struct {
	MemoryLimit int64  // the soft memory limit in force (math.MaxInt64: none)
	LimitFrom   string // "$GOMEMLIMIT", "cgroup" or "none"
	GC          string // "$GOGC" or "tuner"
}

// Agent sets the agent's memory policy. With $GOMEMLIMIT unset it sets the
// soft memory limit to the limit of the cgroup under cgroupRoot (what the
// deploy manifests pass as $GOMEMLIMIT), so a heap near the container's
// limit is collected harder rather than killed. With $GOGC unset it starts
// the Tuner at BasePercent, for the life of the process. getenv reads the environment (os.Getenv).
func Agent(getenv func(string) string, cgroupRoot string) (Policy, error) {
	p := Policy{LimitFrom: "$GOMEMLIMIT", GC: "$GOGC"}
	var err error
	if getenv("GOMEMLIMIT") == "" {
		p.LimitFrom = "none"
		lim, ok, cerr := CgroupMemoryLimit(cgroupRoot)
		if cerr != nil {
			err = fmt.Errorf("no memory limit from the cgroup (set $GOMEMLIMIT instead): %w", cerr)
		}
		if ok {
			debug.SetMemoryLimit(lim)
			p.LimitFrom = "cgroup"
		}
	}
	p.MemoryLimit = debug.SetMemoryLimit(-1)
	if getenv("GOGC") == "" {
		StartTuner(BasePercent)
		p.GC = "tuner"
	}
	return p, err
}
