package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves h on addr (named by its flag in errors) until ctx ends;
// with tlsCfg, over TLS.
func Serve(ctx context.Context, flagName, addr string, h http.Handler, tlsCfg *tls.Config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", flagName, err)
	}
	srv := &http.Server{Handler: h, TLSConfig: tlsCfg, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if tlsCfg != nil {
		log.Info("serving TLS", "addr", ln.Addr().String())
		err = srv.ServeTLS(ln, "", "")
	} else {
		log.Info("serving", "addr", ln.Addr().String())
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
