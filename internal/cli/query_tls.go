package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/netdrift/netdrift/internal/api"
)

// tlsFlags are the client options of the agent's secure endpoint
// (--secure-listen): a bearer token it checks with a TokenReview and
// SubjectAccessReview, and the CA that signed its certificate.
type tlsFlags struct {
	token, tokenFile string
	caFile           string
	insecure         bool
}

func (t *tlsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.token, "agent-token", "", "bearer `TOKEN` for the agent's TLS endpoint (e.g. from kubectl create token)")
	fs.StringVar(&t.tokenFile, "agent-token-file", "", "read the bearer token from `FILE`")
	fs.StringVar(&t.caFile, "agent-ca-file", "", "verify the agent's TLS certificate with the CA certificates (PEM) in `FILE`")
	fs.BoolVar(&t.insecure, "agent-insecure-skip-tls-verify", false, "do not verify the agent's TLS certificate (anyone on the path can read the token)")
}

func (t *tlsFlags) checkTLS() error {
	if t.token != "" && t.tokenFile != "" {
		return usagef("--agent-token and --agent-token-file: give one")
	}
	if t.insecure && t.caFile != "" {
		return usagef("--agent-ca-file and --agent-insecure-skip-tls-verify: give one")
	}
	return nil
}

// client is the API client for base with the token and TLS options. A
// token is refused over plain HTTP to another host than this one: it
// would cross the network in the clear.
func (t *tlsFlags) client(base string, stderr io.Writer) (*api.Client, error) {
	c := api.NewClient(base)
	u, err := url.Parse(c.Base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--agent %q: want http://HOST:PORT or https://HOST:PORT", base)
	}
	if c.Token, err = t.readToken(); err != nil {
		return nil, err
	}
	if c.Token != "" && u.Scheme == "http" && !loopback(u.Hostname()) {
		return nil, fmt.Errorf("a token over plain http to %s would cross the network in the clear: use the agent's https:// endpoint", u.Host)
	}
	if u.Scheme != "https" {
		return c, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case t.insecure:
		fmt.Fprintf(stderr, "warning: --agent-insecure-skip-tls-verify: the certificate of %s is not checked; whoever answers gets the token\n", u.Host)
		cfg.InsecureSkipVerify = true
	case t.caFile != "":
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return nil, fmt.Errorf("--agent-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--agent-ca-file %s: no PEM certificate in it", t.caFile)
		}
		cfg.RootCAs = pool
	}
	c.HTTP.Transport = &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: cfg}
	return c, nil
}

func (t *tlsFlags) readToken() (string, error) {
	if t.tokenFile == "" {
		return t.token, nil
	}
	b, err := os.ReadFile(t.tokenFile)
	if err != nil {
		return "", fmt.Errorf("--agent-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--agent-token-file %s is empty", t.tokenFile)
	}
	return tok, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsHint adds to a certificate error what to pass.
func tlsHint(err error) error {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	switch {
	case errors.As(err, &ua):
		return fmt.Errorf("%w (pass --agent-ca-file with the CA of the agent's certificate)", err)
	case errors.As(err, &hn):
		return fmt.Errorf("%w (the certificate does not name this address: use one it names)", err)
	}
	return err
}
