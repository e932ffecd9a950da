package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"

	"k8s.io/client-go/kubernetes"

	"github.com/netdrift/netdrift/internal/authn"
)

// secureHandler guards h with TokenReview + SubjectAccessReview; /healthz
// and /readyz stay open.
func secureHandler(ctx context.Context, f agentFlags, client kubernetes.Interface, h http.Handler, log *slog.Logger) (http.Handler, *tls.Config, error) {
	mw := authn.New(authn.Config{Logger: log}, client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews())
	opts := authn.TLSOptions{CertFile: f.tlsCert, KeyFile: f.tlsKey, Logger: log}
	if f.tlsCert == "" {
		opts.Hosts = authn.ServingHosts(ctx, client.CoreV1().Nodes(), f.nodeName, log)
		log.Info("self-signed serving certificate", "names", opts.Hosts)
	}
	tlsCfg, err := authn.ServerTLSConfig(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("--secure-listen: %w", err)
	}
	return mw.Wrap(h), tlsCfg, nil
}
