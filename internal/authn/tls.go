package authn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"sync"
	"time"
)

// TLSOptions says where the secure endpoint's certificate comes from.
type TLSOptions struct {
	// CertFile and KeyFile (PEM) are served when both are set, and re-read when either
	// file changes (checked at most every ReloadInterval), so a rotated certificate is
	// picked up without a restart. Both empty: a self-signed certificate is generated.
	CertFile, KeyFile string
	// Hosts are the DNS names and IP addresses of a generated certificate.
	Hosts []string
	// ReloadInterval: default 30s.
	ReloadInterval time.Duration
	// Now is the clock (tests inject one). Logger receives reload errors.
	Now    func() time.Time
	Logger *slog.Logger
}

// ServerTLSConfig returns the TLS configuration of the secure endpoint.
func ServerTLSConfig(o TLSOptions) (*tls.Config, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = 30 * time.Second
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case o.CertFile == "" && o.KeyFile == "":
		cert, err := SelfSigned(o.Hosts, o.Now())
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	case o.CertFile == "" || o.KeyFile == "":
		return nil, errors.New("tls: a certificate file needs its key file and the key its certificate")
	default:
		r := &keyPairReloader{certFile: o.CertFile, keyFile: o.KeyFile, interval: o.ReloadInterval, now: o.Now, logger: o.Logger}
		if err := r.load(); err != nil {
			return nil, err
		}
		cfg.GetCertificate = r.getCertificate
	}
	return cfg, nil
}

// SelfSigned returns a fresh ECDSA P-256 certificate for hosts, valid for a year from now
// (and an hour before, for clock skew). Prometheus scrapes it with insecureSkipVerify: the
// bearer token, not the certificate, is what the agent checks.
func SelfSigned(hosts []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "netdrift"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls: create certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// keyPairReloader serves a certificate from files and re-reads them when they change.
// A broken new pair is logged and the previous one kept.
type keyPairReloader struct {
	certFile, keyFile string
	interval          time.Duration
	now               func() time.Time
	logger            *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	certMod   time.Time
	keyMod    time.Time
	lastCheck time.Time
}

func (r *keyPairReloader) load() error {
	certMod, keyMod, err := r.modTimes()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certMod, r.keyMod, r.lastCheck = &cert, certMod, keyMod, r.now()
	return nil
}

func (r *keyPairReloader) modTimes() (time.Time, time.Time, error) {
	c, err := os.Stat(r.certFile)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("tls: %w", err)
	}
	k, err := os.Stat(r.keyFile)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("tls: %w", err)
	}
	return c.ModTime(), k.ModTime(), nil
}

func (r *keyPairReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Sub(r.lastCheck) < r.interval {
		return r.cert, nil
	}
	r.lastCheck = r.now()
	certMod, keyMod, err := r.modTimes()
	if err != nil {
		r.logger.Warn("tls: keeping the current certificate", "err", err)
		return r.cert, nil
	}
	if certMod.Equal(r.certMod) && keyMod.Equal(r.keyMod) {
		return r.cert, nil
	}
	prev := r.cert
	if err := r.load(); err != nil {
		r.logger.Warn("tls: keeping the current certificate", "err", err)
		r.cert = prev
	}
	return r.cert, nil
}
