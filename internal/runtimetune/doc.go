// Package runtimetune sets the Go runtime's memory policy of the agent: a
// soft memory limit from the container's memory limit, and a GC headroom
// that follows the live heap (Tuner). It imports nothing of netdrift; only
// cmd/agent calls it, once at start. See docs/architecture.md.
package runtimetune
