package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"
)

// Timeouts of the kubelet's streaming server defaults.
const (
	idleTimeout           = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

// newHandler serves the kubelet's port-forward, exec and containerLogs
// paths. The pod is not checked: the API server has already found it bound
// to this node.
func newHandler(dialIP string, ex *execServer, logs *logServer) http.Handler {
	pf := nodeForwarder{ip: dialIP}
	serve := func(w http.ResponseWriter, req *http.Request) {
		opts, err := portforward.NewV4Options(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		log.Printf("port-forward %s %s/%s", req.Method, req.PathValue("ns"), req.PathValue("pod"))
		portforward.ServePortForward(w, req, pf, req.PathValue("pod"), req.PathValue("uid"), opts,
			idleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
	}
	mux := http.NewServeMux()
	for _, p := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
		mux.HandleFunc("GET "+p, serve)
		mux.HandleFunc("POST "+p, serve)
	}
	for _, p := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
		mux.HandleFunc("GET "+p, ex.serve)
		mux.HandleFunc("POST "+p, ex.serve)
	}
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", logs.serve)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	return mux
}

// nodeForwarder connects each stream to <node IP>:port.
type nodeForwarder struct{ ip string }

func (f nodeForwarder) PortForward(ctx context.Context, pod, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(f.ip, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("pod %s: port %d: %w", pod, port, err)
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); closeWrite(conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
