package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/authn"
)

// secureHandler guards h with TokenReview + SubjectAccessReview; /healthz
// and /readyz stay open.
func secureHandler(ctx context.Context, f agentFlags, client kubernetes.Interface, h http.Handler, log *slog.Logger) (http.Handler, *tls.Config, error) {
	mw := authn.New(authn.Config{Logger: log}, client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews())
	opts := authn.TLSOptions{CertFile: f.tlsCert, KeyFile: f.tlsKey, Logger: log}
	if f.tlsCert == "" {
		opts.Hosts = servingHosts(ctx, client, f.nodeName, log)
		log.Info("self-signed serving certificate", "names", opts.Hosts)
	}
	tlsCfg, err := authn.ServerTLSConfig(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("--secure-listen: %w", err)
	}
	return mw.Wrap(h), tlsCfg, nil
}

// servingHosts are the names of the self-signed serving certificate: the
// node's name, loopback, and the node's addresses (the Node object's
// InternalIP, ExternalIP and Hostname addresses, and the addresses of
// this network namespace's interfaces: the host's, as the agent runs with
// hostNetwork), so that a client holding the certificate as its CA can
// verify https://NODE_IP:9761. A Node that cannot be read is logged: the
// interfaces' addresses still name the node.
func servingHosts(ctx context.Context, client kubernetes.Interface, node string, log *slog.Logger) []string {
	hosts := []string{node, "localhost", "127.0.0.1", "::1"}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
		log.Warn("serving certificate: the Node's addresses are not in it", "node", node, "err", err)
	} else {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP || a.Type == corev1.NodeHostName {
				hosts = append(hosts, a.Address)
			}
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
				hosts = append(hosts, ipn.IP.String())
			}
		}
	}
	slices.Sort(hosts[4:])
	return append(hosts[:4], slices.Compact(hosts[4:])...)
}

func serveTLS(ctx context.Context, addr string, h http.Handler, cfg *tls.Config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--secure-listen: %w", err)
	}
	srv := &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Info("serving TLS", "addr", ln.Addr().String())
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
