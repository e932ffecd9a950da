package api

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
)

// CheckPprofAddr accepts only a loopback address: a heap profile holds what
// the agent's memory holds (service names, addresses, tokens in flight).
func CheckPprofAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-listen %q: want host:port, e.g. 127.0.0.1:9762: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--pprof-listen %q: profiles expose the agent's memory; listen on 127.0.0.1 or [::1] and forward the port", addr)
	}
	return nil
}

// PprofHandler serves Go's runtime profiles under /debug/pprof/ (on its
// own listener, --pprof-listen; never on the API's).
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
