package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/authn"
)

// secureHandler guards h with TokenReview + SubjectAccessReview; /healthz
// and /readyz stay open.
func secureHandler(f agentFlags, client kubernetes.Interface, h http.Handler, log *slog.Logger) (http.Handler, *tls.Config, error) {
	mw := authn.New(authn.Config{Logger: log}, client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews())
	tlsCfg, err := authn.ServerTLSConfig(authn.TLSOptions{CertFile: f.tlsCert, KeyFile: f.tlsKey,
		Hosts: []string{f.nodeName, "localhost", "127.0.0.1"}, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("--secure-listen: %w", err)
	}
	return mw.Wrap(h), tlsCfg, nil
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
