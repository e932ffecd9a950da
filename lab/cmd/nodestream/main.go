// Command nodestream is the lab's stand-in for the parts of a kubelet the
// API server calls for `kubectl port-forward`, `kubectl exec` and `kubectl
// logs`: the streaming port-forward and exec endpoints
// (/portForward/{namespace}/{pod}[/{uid}], /exec/{namespace}/{pod}[/{uid}]/{container}),
// served with the kubelet's own streaming library (k8s.io/cri-streaming),
// and /containerLogs/{namespace}/{pod}/{container}, over TLS at the kubelet
// port of one lab node. Each forwarded stream is connected to the requested
// port of the node. Exec and logs serve the netdrift agent's container only
// (exec.go, logs.go): its commands run in the node's network namespace, its
// log is the lab agent's log file.
//
// The lab runs one nodestream per node, inside the node's network
// namespace (labenv). The lab's agents are host-network pods that listen
// on the node IP rather than loopback, so that the lab's Prometheus (in the
// router namespace) can scrape them; nodestream therefore dials
// <node IP>:<port> where a kubelet's runtime would dial localhost:<port> in
// the pod's network namespace.
//
// As a kubelet's, the server requires a client certificate signed by
// --client-ca-file (the API server's --kubelet-client-certificate) and
// serves one the API server verifies (--kubelet-certificate-authority).
// Any holder of such a certificate may forward: a kubelet would also ask
// the API server whether the caller may (SubjectAccessReview); the lab's
// only such caller is the API server.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	certFile := flag.String("tls-cert-file", "", "serving certificate")
	keyFile := flag.String("tls-key-file", "", "serving certificate's key")
	clientCA := flag.String("client-ca-file", "", "CA of the client certificates accepted (the API server's)")
	ex := &execServer{}
	logs := &logServer{}
	flag.StringVar(&ex.binDir, "agent-bin-dir", "", "the directory of the netdrift binary: the agent container's PATH for exec (empty: no exec)")
	flag.StringVar(&ex.localListen, "agent-local-listen", "127.0.0.1:9760", "the agent's plain listener in the pod, forwarded to the same port of --dial-ip at the first exec (empty: none)")
	flag.StringVar(&logs.file, "agent-log", "", "the agent's log file, served as the agent container's log (empty: no logs)")
	flag.Parse()
	ex.dialIP = *dialIP
	if err := run(*listen, *dialIP, *certFile, *keyFile, *clientCA, ex, logs); err != nil {
		log.Fatalf("nodestream: %v", err)
	}
}

func run(listen, dialIP, certFile, keyFile, clientCA string, ex *execServer, logs *logServer) error {
	if listen == "" || net.ParseIP(dialIP) == nil || certFile == "" || keyFile == "" || clientCA == "" {
		return errors.New("need --listen <node IP>:10250, --dial-ip <node IP>, --tls-cert-file, --tls-key-file and --client-ca-file")
	}
	tlsConfig, err := serverTLS(certFile, keyFile, clientCA)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              listen,
		Handler:           newHandler(dialIP, ex, logs),
		TLSConfig:         tlsConfig,
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
	fmt.Printf("nodestream: serving /portForward, /exec and /containerLogs on https://%s, forwarding to %s\n", listen, dialIP)
	if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serverTLS serves certFile and requires client certificates signed by clientCA.
func serverTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(clientCA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", clientCA)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}
