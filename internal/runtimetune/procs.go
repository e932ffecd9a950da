package runtimetune

import "runtime"

// Procs sets GOMAXPROCS for the agent: n (the --max-procs flag, default 1)
// unless $GOMAXPROCS is set and the flag was not given (explicit); 0 keeps
// the runtime's choice. The agent's work is one loop fed by watch and
// change-event goroutines; a second P makes it no faster but adds scheduler
// wake-ups and spinning to every delivery (cost in BENCHMARKS.md, "Live").
func Procs(n int, explicit bool, getenv func(string) string) {
	if n > 0 && (explicit || getenv("GOMAXPROCS") == "") {
		runtime.GOMAXPROCS(n)
	}
}
