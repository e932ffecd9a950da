// Command nodestream is the lab's stand-in for the one part of a kubelet
// the API server calls for `kubectl port-forward`: the streaming
// port-forward endpoint (/portForward/{namespace}/{pod}[/{uid}]), served
// with the kubelet's own streaming library (k8s.io/cri-streaming) over TLS
// at the kubelet port of one lab node. Each forwarded stream is connected to
// the requested port of the node.
//
// The lab runs one nodestream per node, inside the node's network
// namespace (labenv). The lab's agents are host-network pods that listen
// on the node IP rather than loopback, so that the lab's Prometheus (in the
// router namespace) can scrape them; nodestream therefore dials
// <node IP>:<port> where a kubelet's runtime would dial localhost:<port> in
// the pod's network namespace.
//
// The API server is not authenticated (a kubelet checks its client
// certificate): nodestream listens only on the lab bridge, which nothing
// outside the lab's namespaces reaches.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "", "address to serve TLS on: <node IP>:10250")
	dialIP := flag.String("dial-ip", "", "the node IP forwarded streams connect to")
	flag.Parse()
	if err := run(*listen, *dialIP); err != nil {
		log.Fatalf("nodestream: %v", err)
	}
}

func run(listen, dialIP string) error {
	if listen == "" || net.ParseIP(dialIP) == nil {
		return errors.New("need --listen <node IP>:10250 and --dial-ip <node IP>")
	}
	cert, err := selfSigned(dialIP)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              listen,
		Handler:           newHandler(dialIP),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		// No HTTP/2: SPDY and WebSocket upgrades need HTTP/1.1.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
	}()
	fmt.Printf("nodestream: serving /portForward on https://%s, forwarding to %s\n", listen, dialIP)
	if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
